package health

import (
	"context"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// checkPOP is ldirectord's check_pop (and pops, over TLS): the +OK
// greeting, then, with a login, USER and PASS must each be answered +OK;
// then QUIT. (POP3 is lines of text: spoken here, no client module.)
func (c *Checker) checkPOP(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
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
	if !strings.HasPrefix(greeting, "+OK") {
		return fail("greeting " + strconv.Quote(shorten(greeting)) + ", want +OK")
	}
	if spec.Login == "" {
		_ = t.send("QUIT")
		return pass(shorten(greeting))
	}
	for _, cmd := range [...]struct{ verb, arg string }{{"USER", spec.Login}, {"PASS", password}} {
		if strings.ContainsAny(cmd.arg, "\r\n") {
			return fault(cmd.verb + ": holds a line end")
		}
		if err := t.send(cmd.verb + " " + cmd.arg); err != nil {
			return describe(ctx, spec, err)
		}
		reply, err := t.line()
		if err != nil {
			return describe(ctx, spec, err)
		}
		if !strings.HasPrefix(reply, "+OK") {
			return fail(cmd.verb + " answered " + strconv.Quote(shorten(reply)))
		}
	}
	_ = t.send("QUIT")
	return pass("logged in as " + spec.Login)
}
