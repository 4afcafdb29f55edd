// Package health runs the health checks of real servers: the checkers (tcp,
// http, https, send_expect, dns, exec, agent, smtp, ping, file, and
// ldirectord's negotiate checks: mysql, pgsql, ldap, imap, pop, ftp,
// radius, sip), one scheduler for all of them,
// and the state machine that turns results into up and down with rise and
// fall, slow start and the weights checks set. Its view is an input to the
// plan (ipvsmgr.ApplyHealth); it never changes the desired state.
package health

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Outcome is what one check run found.
type Outcome uint8

const (
	// Pass: the real server answered as expected.
	Pass Outcome = iota + 1
	// Fail: it did not (down after fall of these in a row).
	Fail
	// Fault: the check could not run at all (no route, no file descriptor,
	// program not found): a problem of the director, not a verdict on the
	// real server, so it counts neither way.
	Fault
)

func (o Outcome) String() string {
	switch o {
	case Pass:
		return "pass"
	case Fail:
		return "fail"
	case Fault:
		return "fault"
	}
	return "none"
}

// Result is one check run.
type Result struct {
	Outcome Outcome
	// Reason is short and human: "HTTP 200", "timeout after 1s",
	// "connection refused", "exit status 3", "TLS: certificate expired".
	Reason   string
	Duration time.Duration
	// Weight is the weight an exec check with dynamic_weight set (-1: none).
	Weight int
	// Percent is the share of the configured weight an agent asked for
	// (-1: none).
	Percent int
	// Delta is what a file check adds to the configured weight.
	Delta int
}

func pass(reason string) Result {
	return Result{Outcome: Pass, Reason: reason, Weight: -1, Percent: -1}
}
func fail(reason string) Result {
	return Result{Outcome: Fail, Reason: reason, Weight: -1, Percent: -1}
}
func fault(reason string) Result {
	return Result{Outcome: Fault, Reason: reason, Weight: -1, Percent: -1}
}

// Checker runs checks. Its zero value is ready.
type Checker struct {
	// RootCAs verifies https servers when tls_verify is set; nil: the
	// system's roots.
	RootCAs *x509.CertPool

	regexps sync.Map // expression -> *regexp.Regexp
}

// Run runs one check of spec, cut at its timeout (or ctx's end).
func (c *Checker) Run(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	var r Result
	switch spec.Type {
	case "tcp":
		r = checkTCP(ctx, spec)
	case "http", "https":
		r = c.checkHTTP(ctx, spec)
	case "send_expect":
		r = c.checkSendExpect(ctx, spec)
	case "dns":
		r = checkDNS(ctx, spec)
	case "exec":
		r = c.checkExec(ctx, spec)
	case "agent":
		r = checkAgent(ctx, spec)
	case "smtp":
		r = checkSMTP(ctx, spec)
	case "ping":
		r = checkPing(ctx, spec)
	case "file":
		r = checkFile(spec)
	case "mysql", "pgsql":
		r = checkSQL(ctx, spec)
	case "ldap", "ldaps":
		r = c.checkLDAP(ctx, spec)
	case "imap", "imaps":
		r = c.checkIMAP(ctx, spec)
	case "pop", "pops":
		r = c.checkPOP(ctx, spec)
	case "ftp":
		r = c.checkFTP(ctx, spec)
	case "radius":
		r = checkRADIUS(ctx, spec)
	case "sip":
		r = checkSIP(ctx, spec)
	case "nntp":
		r = c.checkNNTP(ctx, spec)
	case "none", "":
		r = pass("no check")
	default:
		r = fault(fmt.Sprintf("unknown check type %q", spec.Type))
	}
	if r.Outcome != Pass && ctx.Err() == context.DeadlineExceeded {
		// Whatever broke first when the time ran out, the reason is the timeout.
		r = fail("timeout after " + spec.Timeout.String())
	}
	r.Duration = time.Since(start)
	return r
}

// describe turns a network error into a short reason, and says whether it
// is the director's fault rather than the real server's.
func describe(ctx context.Context, spec *ipvsmgr.CheckSpec, err error) Result {
	if ctx.Err() == context.DeadlineExceeded || errors.Is(err, os.ErrDeadlineExceeded) {
		return fail("timeout after " + spec.Timeout.String())
	}
	if ctx.Err() == context.Canceled {
		return fault("check cancelled")
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ECONNREFUSED:
			return fail("connection refused")
		case syscall.ECONNRESET, syscall.EPIPE:
			return fail("connection reset")
		case syscall.EHOSTUNREACH:
			return fail("host unreachable")
		case syscall.ETIMEDOUT:
			return fail("timeout after " + spec.Timeout.String())
		case syscall.ENETUNREACH:
			return fault("network unreachable (no route from the director)")
		case syscall.EMFILE, syscall.ENFILE:
			return fault("out of file descriptors")
		case syscall.ENOBUFS, syscall.ENOMEM:
			return fault("out of memory for sockets")
		case syscall.EADDRNOTAVAIL, syscall.EADDRINUSE:
			return fault("no local address or port to connect from")
		case syscall.EPERM, syscall.EACCES:
			return fault("connect not permitted (local firewall?)")
		}
		return fail(errno.Error())
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fail("connection closed")
	}
	if r, ok := describeTLS(err); ok {
		return r
	}
	return fail(shorten(err.Error()))
}

func describeTLS(err error) (Result, bool) {
	var inv x509.CertificateInvalidError
	if errors.As(err, &inv) {
		switch inv.Reason {
		case x509.Expired:
			return fail("TLS: certificate expired"), true
		case x509.NameMismatch:
			return fail("TLS: certificate name mismatch"), true
		}
		return fail("TLS: certificate invalid"), true
	}
	var unknown x509.UnknownAuthorityError
	if errors.As(err, &unknown) {
		return fail("TLS: certificate signed by an unknown authority"), true
	}
	var host x509.HostnameError
	if errors.As(err, &host) {
		return fail("TLS: certificate is not for " + host.Host), true
	}
	var rec tls.RecordHeaderError
	if errors.As(err, &rec) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return fail("TLS: the server does not speak TLS"), true
	}
	var alert tls.AlertError
	if errors.As(err, &alert) {
		return fail("TLS: " + alert.Error()), true
	}
	return Result{}, false
}

// shorten keeps a reason to one short line.
func shorten(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

func dial(ctx context.Context, network string, target string) (net.Conn, error) {
	// No keep-alive: a check's connection lives for a moment, and its
	// setsockopt calls cost more than the connect on a thousand targets.
	d := net.Dialer{KeepAlive: -1}
	return d.DialContext(ctx, network, target)
}

func checkTCP(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	conn, err := dial(ctx, "tcp", spec.Target.String())
	if err != nil {
		return describe(ctx, spec, err)
	}
	conn.Close()
	return pass("connected")
}
