package health

import (
	"bufio"
	"context"
	"errors"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// checkSMTP is keepalived's SMTP_CHECK: connect, read the 220 greeting,
// say HELO and want 250, then QUIT.
func checkSMTP(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	conn, err := dial(ctx, "tcp", spec.Target.String())
	if err != nil {
		return describe(ctx, spec, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	tp := textproto.NewConn(conn)
	tp.Reader = *textproto.NewReader(bufio.NewReader(&limitedReader{r: conn, n: maxReply}))
	code, msg, err := tp.ReadResponse(0)
	if err != nil && code == 0 {
		return describe(ctx, spec, err)
	}
	if code != 220 {
		return fail("greeting " + strconv.Itoa(code) + " " + shorten(firstLine(msg)) + ", want 220")
	}
	if err := tp.PrintfLine("HELO %s", spec.Name); err != nil {
		return describe(ctx, spec, err)
	}
	code, msg, err = tp.ReadResponse(0)
	if err != nil && code == 0 {
		return describe(ctx, spec, err)
	}
	if code != 250 {
		return fail("HELO answered " + strconv.Itoa(code) + " " + shorten(firstLine(msg)) + ", want 250")
	}
	_ = tp.PrintfLine("QUIT")
	return pass("250 " + shorten(firstLine(msg)))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

var errReplyTooLong = errors.New("reply longer than 4 KiB")

// limitedReader stops a server that never ends its reply from filling
// memory.
type limitedReader struct {
	r interface{ Read([]byte) (int, error) }
	n int
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errReplyTooLong
	}
	if len(p) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= n
	return n, err
}
