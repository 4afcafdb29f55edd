package health

import (
	"context"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// checkIMAP is ldirectord's check_imap and check_imaps: the server's OK
// greeting, then, with a login, LOGIN must be answered OK; then LOGOUT.
// (IMAP's LOGIN is a line of text: spoken here, no client module needed.)
func (c *Checker) checkIMAP(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	password, err := readSecret(spec.PasswordFile)
	if err != nil {
		return secretFault(err)
	}
	t, err := c.dialText(ctx, spec)
	if err != nil {
		return describe(ctx, spec, err)
	}
	defer t.Close()
	greeting, err := t.line()
	if err != nil {
		return describe(ctx, spec, err)
	}
	if !strings.HasPrefix(greeting, "* OK") && !strings.HasPrefix(greeting, "* PREAUTH") {
		return fail("greeting " + strconv.Quote(shorten(greeting)) + ", want * OK")
	}
	if spec.Login == "" {
		_ = t.send("a0 LOGOUT")
		return pass(shorten(greeting))
	}
	if err := t.send("a1 LOGIN " + imapQuote(spec.Login) + " " + imapQuote(password)); err != nil {
		return describe(ctx, spec, err)
	}
	reply, err := imapTagged(t, "a1 ")
	if err != nil {
		return describe(ctx, spec, err)
	}
	_ = t.send("a2 LOGOUT")
	if !strings.HasPrefix(reply, "a1 OK") {
		return fail("LOGIN answered " + strconv.Quote(shorten(strings.TrimPrefix(reply, "a1 "))))
	}
	return pass("logged in as " + spec.Login)
}

// imapTagged reads to the tagged reply, past the untagged ones.
func imapTagged(t *textConn, tag string) (string, error) {
	for {
		line, err := t.line()
		if err != nil || strings.HasPrefix(line, tag) {
			return line, err
		}
	}
}

// imapQuote is an IMAP quoted string (RFC 3501): backslash and double
// quote escaped; a line end cannot be in one (validation refuses it in a
// login, and a password file's would end the command).
func imapQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\r", "", "\n", "").Replace(s) + `"`
}
