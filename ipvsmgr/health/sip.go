package health

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// checkSIP is ldirectord's check_sip: an OPTIONS request for sip:login
// over the check's protocol (udp, or tcp), passing on a final 200 reply.
// Spoken here rather than through a SIP stack: one request and its answer
// need no dialogs, transactions or transports of a user agent library,
// and this is exactly ldirectord's request. Unlike ldirectord, any reason
// phrase is taken with 200 (Kamailio's is "Keepalive"), and provisional
// 1xx replies are read past.
func checkSIP(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	network := "udp"
	if spec.Protocol == "tcp" {
		network = "tcp"
	}
	conn, err := dial(ctx, network, spec.Target.String())
	if err != nil {
		return describe(ctx, spec, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	callID := randomHex(8)
	req := sipOptions(spec.Login, network, conn.LocalAddr(), callID)
	if _, err := conn.Write(req); err != nil {
		return describe(ctx, spec, err)
	}
	if network == "udp" {
		// A lost datagram is not a failure: resend while no answer came.
		resend := time.AfterFunc(spec.Timeout/2, func() { conn.Write(req) })
		defer resend.Stop()
		return readSIPDatagrams(ctx, spec, conn, callID)
	}
	return readSIPStream(ctx, spec, bufio.NewReader(&limitedReader{r: conn, n: 4 * maxReply}), callID)
}

func sipOptions(login, network string, local net.Addr, callID string) []byte {
	via := local.String()
	if ap, err := netip.ParseAddrPort(via); err == nil {
		via = ap.String()
	}
	var b strings.Builder
	b.WriteString("OPTIONS sip:" + login + " SIP/2.0\r\n")
	b.WriteString("Via: SIP/2.0/" + strings.ToUpper(network) + " " + via + ";branch=z9hG4bK" + randomHex(8) + ";rport\r\n")
	b.WriteString("Max-Forwards: 70\r\n")
	b.WriteString("To: <sip:" + login + ">\r\n")
	b.WriteString("From: <sip:" + login + ">;tag=" + randomHex(4) + "\r\n")
	b.WriteString("Call-ID: " + callID + "\r\n")
	b.WriteString("CSeq: 1 OPTIONS\r\n")
	b.WriteString("Contact: <sip:" + login + ">\r\n")
	b.WriteString("Accept: application/sdp\r\n")
	b.WriteString("Content-Length: 0\r\n\r\n")
	return []byte(b.String())
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func readSIPDatagrams(ctx context.Context, spec *ipvsmgr.CheckSpec, conn net.Conn, callID string) Result {
	buf := make([]byte, 65535)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return describe(ctx, spec, err)
		}
		if r, final := sipVerdict(bufio.NewReader(bytes.NewReader(buf[:n])), callID); final {
			return r
		}
	}
}

func readSIPStream(ctx context.Context, spec *ipvsmgr.CheckSpec, rd *bufio.Reader, callID string) Result {
	for {
		r, final := sipVerdict(rd, callID)
		if final {
			return r
		}
		if r.Outcome == Fault { // the stream ended or broke
			return describe(ctx, spec, errSIPStream)
		}
	}
}

var errSIPStream = net.ErrClosed

// sipVerdict reads one response's status line and headers: final is false
// for a provisional reply or another request's answer (a stray datagram).
func sipVerdict(rd *bufio.Reader, callID string) (Result, bool) {
	status, err := rd.ReadString('\n')
	if err != nil {
		return fault("no reply"), false
	}
	status = strings.TrimRight(status, "\r\n")
	proto, rest, _ := strings.Cut(status, " ")
	codeText, reason, _ := strings.Cut(rest, " ")
	code, err := strconv.Atoi(codeText)
	if proto != "SIP/2.0" || err != nil {
		return fail("reply " + strconv.Quote(shorten(status)) + " is not a SIP response"), true
	}
	ours := false
	for {
		line, err := rd.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if line == "" || err != nil {
			break
		}
		name, value, _ := strings.Cut(line, ":")
		if n := strings.ToLower(strings.TrimSpace(name)); (n == "call-id" || n == "i") && strings.TrimSpace(value) == callID {
			ours = true
		}
	}
	switch {
	case !ours || code < 200:
		return Result{}, false
	case code == 200:
		return pass("SIP 200 " + shorten(reason)), true
	}
	return fail("SIP " + strconv.Itoa(code) + " " + shorten(reason) + ", want 200"), true
}
