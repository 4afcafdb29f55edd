package health

import (
	"context"
	"errors"
	"io"
	"net"
	"net/textproto"
	"strconv"
	"time"

	"github.com/jlaffaye/ftp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// checkFTP is ldirectord's check_ftp: log in (default anonymous), and with
// a request, fetch that file (binary, passive, from /) and want its
// content to match receive. Unlike ldirectord, a login or a RETR that
// fails is down even when receive is empty (ldirectord's empty pattern
// would match the empty file it never got).
func (c *Checker) checkFTP(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	password, err := readSecret(spec.PasswordFile)
	if err != nil {
		return secretFault(err)
	}
	if spec.PasswordFile == "" && spec.Login == "anonymous" {
		password = "ipvsctl@localhost" // ldirectord's ldirectord@HOSTNAME
	}
	deadline, _ := ctx.Deadline()
	// Every connection, the control one and each data one, dies at the
	// check's deadline: no call of the client can outlive it.
	dialer := func(network, address string) (net.Conn, error) {
		conn, err := dial(ctx, network, address)
		if err == nil {
			conn.SetDeadline(deadline)
		}
		return conn, err
	}
	sc, err := ftp.Dial(spec.Target.String(), ftp.DialWithDialFunc(dialer), ftp.DialWithContext(ctx),
		ftp.DialWithShutTimeout(time.Until(deadline)))
	if err != nil {
		return describeFTP(ctx, spec, "connect", err)
	}
	defer sc.Quit()
	if err := sc.Login(spec.Login, password); err != nil {
		return describeFTP(ctx, spec, "login", err)
	}
	if spec.Request == "" {
		return pass("logged in as " + spec.Login)
	}
	if err := sc.ChangeDir("/"); err != nil {
		return describeFTP(ctx, spec, "CWD /", err)
	}
	r, err := sc.Retr(spec.Request)
	if err != nil {
		return describeFTP(ctx, spec, "RETR "+spec.Request, err)
	}
	body, err := io.ReadAll(io.LimitReader(r, maxBody))
	r.Close()
	if err != nil {
		return describeFTP(ctx, spec, "RETR "+spec.Request, err)
	}
	if spec.Receive != "" {
		re, err := c.compiled(spec.Receive)
		if err != nil {
			return fault("receive: " + shorten(err.Error()))
		}
		if !re.Match(body) {
			return fail(spec.Request + ": " + strconv.Itoa(len(body)) + " bytes not matching receive")
		}
	}
	return pass(spec.Request + ": " + strconv.Itoa(len(body)) + " bytes")
}

func describeFTP(ctx context.Context, spec *ipvsmgr.CheckSpec, what string, err error) Result {
	var te *textproto.Error
	if errors.As(err, &te) {
		return fail(what + ": " + strconv.Itoa(te.Code) + " " + shorten(te.Msg))
	}
	r := describe(ctx, spec, err)
	if r.Outcome == Fail {
		r.Reason = what + ": " + r.Reason
	}
	return r
}
