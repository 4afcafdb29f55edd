package health

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// maxReply is how much of a send_expect or agent reply is read.
const maxReply = 4 << 10

// checkSendExpect is Piranha's nanny check: connect, send, and match the
// start of the reply.
func (c *Checker) checkSendExpect(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	conn, err := dial(ctx, spec.Protocol, spec.Target.String())
	if err != nil {
		return describe(ctx, spec, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	if spec.Send != "" {
		if _, err := conn.Write([]byte(spec.Send)); err != nil {
			return describe(ctx, spec, err)
		}
	}
	if spec.Expect == "" {
		return pass("sent")
	}
	match := c.expectMatcher(spec)
	var reply []byte
	buf := make([]byte, maxReply)
	for len(reply) < maxReply {
		n, err := conn.Read(buf[:maxReply-len(reply)])
		reply = append(reply, buf[:n]...)
		if n > 0 {
			switch match(reply) {
			case matched:
				return pass("reply matched")
			case mismatched:
				return fail("reply did not match: " + quoteStart(reply))
			}
		}
		if spec.Protocol == "udp" && err == nil {
			break // one datagram is the whole reply
		}
		if err != nil {
			if len(reply) > 0 && (errors.Is(err, os.ErrDeadlineExceeded) || isEOF(err)) {
				break
			}
			if isEOF(err) {
				return fail("connection closed without a reply")
			}
			return describe(ctx, spec, err)
		}
	}
	return fail("reply did not match: " + quoteStart(reply))
}

type matchState int

const (
	needMore matchState = iota
	matched
	mismatched
)

// expectMatcher says whether a reply read so far matches: "*" any reply, a
// prefix, or (use_regex) a regular expression anywhere in it.
func (c *Checker) expectMatcher(spec *ipvsmgr.CheckSpec) func([]byte) matchState {
	switch {
	case spec.Expect == "*":
		return func(b []byte) matchState { return matched }
	case spec.UseRegex:
		re, err := c.compiled(spec.Expect)
		return func(b []byte) matchState {
			if err == nil && re.Match(b) {
				return matched
			}
			return needMore
		}
	}
	want := []byte(spec.Expect)
	return func(b []byte) matchState {
		if len(b) >= len(want) {
			if bytes.HasPrefix(b, want) {
				return matched
			}
			return mismatched
		}
		if !bytes.HasPrefix(want, b) {
			return mismatched
		}
		return needMore
	}
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed)
}

// quoteStart quotes the first line of a reply, briefly.
func quoteStart(b []byte) string {
	s := string(b)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(s)
}
