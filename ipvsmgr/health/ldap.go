package health

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// checkLDAP is ldirectord's check_ldap, for ldap and for ldaps (ldap over
// TLS from the first byte, Net::LDAP's scheme ldaps): bind (as login with
// the password, or anonymously), read the entry at request (a base search
// for objectClass=*), and pass when there is one entry whose DN matches
// receive (any DN when receive is empty).
func (c *Checker) checkLDAP(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	password, err := readSecret(spec.PasswordFile)
	if err != nil {
		return secretFault(err)
	}
	var re *regexp.Regexp
	if spec.Receive != "" {
		if re, err = c.compiled(spec.Receive); err != nil {
			return fault("receive: " + shorten(err.Error()))
		}
	}
	conn, err := dial(ctx, "tcp", spec.Target.String())
	if err == nil {
		conn, err = c.overTLS(ctx, conn, spec)
	}
	if err != nil {
		return describe(ctx, spec, err)
	}
	l := ldap.NewConn(conn, spec.TLS)
	l.Start()
	defer l.Close()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	if deadline, ok := ctx.Deadline(); ok {
		l.SetTimeout(time.Until(deadline))
	}
	if spec.Login != "" && password != "" {
		err = l.Bind(spec.Login, password)
	} else {
		err = l.UnauthenticatedBind("")
	}
	if err != nil {
		return describeLDAP(ctx, spec, "bind", err)
	}
	// No attributes ("1.1"): only the DN is matched.
	res, err := l.Search(ldap.NewSearchRequest(spec.Request, ldap.ScopeBaseObject, ldap.NeverDerefAliases,
		2, 0, false, "(objectClass=*)", []string{"1.1"}, nil))
	if err != nil {
		return describeLDAP(ctx, spec, "search", err)
	}
	if len(res.Entries) != 1 {
		return fail(strconv.Itoa(len(res.Entries)) + " entries at " + strconv.Quote(spec.Request) + ", want 1")
	}
	dn := res.Entries[0].DN
	if re != nil && !re.MatchString(dn) {
		return fail("DN " + strconv.Quote(shorten(dn)) + " does not match receive")
	}
	return pass("DN " + shorten(dn))
}

func describeLDAP(ctx context.Context, spec *ipvsmgr.CheckSpec, what string, err error) Result {
	var le *ldap.Error
	if errors.As(err, &le) && le.ResultCode != ldap.ErrorNetwork {
		return fail(what + ": " + shorten(ldap.LDAPResultCodeMap[le.ResultCode]))
	}
	if ctx.Err() != nil {
		return describe(ctx, spec, ctx.Err())
	}
	return fail(what + ": " + shorten(err.Error()))
}
