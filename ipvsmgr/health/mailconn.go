package health

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"net/textproto"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// textConn is a line conversation with a mail or file server (imap, pop,
// ftp): over TLS from the first byte for imaps and pops, cut at the
// check's deadline, its replies bounded in size.
type textConn struct {
	conn net.Conn
	r    *textproto.Reader
	stop func() bool
}

func (c *Checker) dialText(ctx context.Context, spec *ipvsmgr.CheckSpec) (*textConn, error) {
	conn, err := dial(ctx, "tcp", spec.Target.String())
	if err != nil {
		return nil, err
	}
	if conn, err = c.overTLS(ctx, conn, spec); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	r := textproto.NewReader(bufio.NewReader(&limitedReader{r: conn, n: 4 * maxReply})) // a whole conversation
	return &textConn{conn: conn, r: r, stop: stop}, nil
}

// overTLS is conn itself, or, when spec.TLS, conn after a TLS handshake
// (the certificate verified only with spec.TLSVerify, as ldirectord's
// IO::Socket::SSL and Net::LDAP verify none); conn is closed when the
// handshake fails.
func (c *Checker) overTLS(ctx context.Context, conn net.Conn, spec *ipvsmgr.CheckSpec) (net.Conn, error) {
	if !spec.TLS {
		return conn, nil
	}
	tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: !spec.TLSVerify, RootCAs: c.RootCAs,
		ServerName: spec.Target.Addr().String()})
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

func (t *textConn) line() (string, error) { return t.r.ReadLine() }

func (t *textConn) send(line string) error {
	_, err := t.conn.Write([]byte(line + "\r\n"))
	return err
}

func (t *textConn) Close() {
	t.stop()
	t.conn.Close()
}
