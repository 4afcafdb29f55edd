package health

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/ipvsmgrtest"
)

// loopbacks are the addresses the checks are tried on: IPv4 always, IPv6
// when the machine has ::1.
func loopbacks(t *testing.T) []string {
	out := []string{"127.0.0.1"}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		ln.Close()
		out = append(out, "::1")
	} else {
		t.Logf("no IPv6 loopback: %v", err)
	}
	return out
}

func specFor(typ, addr string) *ipvsmgr.CheckSpec {
	return &ipvsmgr.CheckSpec{Type: typ, Target: netip.MustParseAddrPort(addr), Timeout: time.Second, Interval: time.Second, Rise: 1, Fall: 1}
}

func listen(t *testing.T, network, host string) net.Listener {
	t.Helper()
	ln, err := net.Listen(network, net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// closedPort is an address on host where nothing listens.
func closedPort(t *testing.T, network, host string) string {
	if network == "udp" {
		pc, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		a := pc.LocalAddr().String()
		pc.Close()
		return a
	}
	ln := listen(t, "tcp", host)
	a := ln.Addr().String()
	ln.Close()
	return a
}

func expect(t *testing.T, name string, r Result, outcome Outcome, reason string) {
	t.Helper()
	if r.Outcome != outcome || !strings.Contains(r.Reason, reason) {
		t.Errorf("%s: got %s %q, want %s %q", name, r.Outcome, r.Reason, outcome, reason)
	}
}

func TestTCP(t *testing.T) {
	c := &Checker{}
	for _, host := range loopbacks(t) {
		ln := listen(t, "tcp", host)
		ipvsmgrtest.AcceptAndClose(ln)
		expect(t, host+" listening", c.Run(context.Background(), specFor("tcp", ln.Addr().String())), Pass, "connected")
		expect(t, host+" closed", c.Run(context.Background(), specFor("tcp", closedPort(t, "tcp", host))), Fail, "connection refused")
	}
}

func TestHTTP(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "all good") })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "busy", http.StatusServiceUnavailable) })
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/fail", http.StatusFound) })
	mux.HandleFunc("/host", func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "web.test" || r.Method != http.MethodHead {
			http.NotFound(w, r)
		}
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	c := &Checker{}
	for _, host := range loopbacks(t) {
		srv := httptest.NewUnstartedServer(mux)
		srv.Listener = listen(t, "tcp", host)
		srv.Start()
		t.Cleanup(srv.Close)
		target := srv.Listener.Addr().String()
		run := func(mut func(s *ipvsmgr.CheckSpec)) Result {
			s := specFor("http", target)
			s.Method, s.Path = "GET", "/ok"
			mut(s)
			return c.Run(context.Background(), s)
		}
		expect(t, host+" ok", run(func(s *ipvsmgr.CheckSpec) {}), Pass, "HTTP 200")
		expect(t, host+" body", run(func(s *ipvsmgr.CheckSpec) { s.ExpectBody = "good$" }), Pass, "HTTP 200")
		expect(t, host+" body mismatch", run(func(s *ipvsmgr.CheckSpec) { s.ExpectBody = "^bad" }), Fail, "body did not match")
		expect(t, host+" 503", run(func(s *ipvsmgr.CheckSpec) { s.Path = "/fail" }), Fail, "HTTP 503")
		expect(t, host+" 503 expected", run(func(s *ipvsmgr.CheckSpec) { s.Path, s.ExpectStatus = "/fail", []int{503} }), Pass, "HTTP 503")
		expect(t, host+" 200 not listed", run(func(s *ipvsmgr.CheckSpec) { s.ExpectStatus = []int{204} }), Fail, "HTTP 200")
		expect(t, host+" redirect not followed", run(func(s *ipvsmgr.CheckSpec) { s.Path = "/redirect" }), Pass, "HTTP 302")
		expect(t, host+" host and method", run(func(s *ipvsmgr.CheckSpec) { s.Path, s.Host, s.Method = "/host", "web.test", "HEAD" }), Pass, "HTTP 200")
		expect(t, host+" wrong host", run(func(s *ipvsmgr.CheckSpec) { s.Path = "/host" }), Fail, "HTTP 404")
		start := time.Now()
		expect(t, host+" hang", run(func(s *ipvsmgr.CheckSpec) { s.Path, s.Timeout = "/hang", 300*time.Millisecond }), Fail, "timeout after 300ms")
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("a hung check took %v with a 300ms timeout", took)
		}
		expect(t, host+" refused", c.Run(context.Background(), specFor("http", closedPort(t, "tcp", host))), Fail, "connection refused")
	}
}

// selfSigned makes a certificate for 127.0.0.1 and ::1 valid from notBefore to notAfter.
func selfSigned(t *testing.T, notBefore, notAfter time.Time) (tls.Certificate, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "real server"},
		NotBefore: notBefore, NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, DNSNames: []string{"web.test"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, cert
}

func TestHTTPS(t *testing.T) {
	now := time.Now()
	good, goodCert := selfSigned(t, now.Add(-time.Hour), now.Add(time.Hour))
	expired, expiredCert := selfSigned(t, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	pool := x509.NewCertPool()
	pool.AddCert(goodCert)
	pool.AddCert(expiredCert)
	c := &Checker{RootCAs: pool}
	for _, host := range loopbacks(t) {
		start := func(cert tls.Certificate) (string, *string) {
			var sni string
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, "secure")
			}))
			srv.Listener = listen(t, "tcp", host)
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
				sni = h.ServerName
				return nil, nil
			}}
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			srv.StartTLS()
			t.Cleanup(srv.Close)
			return srv.Listener.Addr().String(), &sni
		}
		goodAddr, sni := start(good)
		expiredAddr, _ := start(expired)
		run := func(addr string, mut func(s *ipvsmgr.CheckSpec)) Result {
			s := specFor("https", addr)
			s.TLS, s.Method, s.Path = true, "GET", "/"
			mut(s)
			return c.Run(context.Background(), s)
		}
		expect(t, host+" verified", run(goodAddr, func(s *ipvsmgr.CheckSpec) { s.TLSVerify = true }), Pass, "HTTP 200")
		expect(t, host+" sni", run(goodAddr, func(s *ipvsmgr.CheckSpec) { s.SNI, s.TLSVerify, s.ExpectBody = "web.test", true, "secure" }), Pass, "HTTP 200")
		if *sni != "web.test" {
			t.Errorf("%s: server saw SNI %q, want web.test", host, *sni)
		}
		expect(t, host+" expired, verified", run(expiredAddr, func(s *ipvsmgr.CheckSpec) { s.TLSVerify = true }), Fail, "TLS: certificate expired")
		expect(t, host+" expired, not verified (the default)", run(expiredAddr, func(s *ipvsmgr.CheckSpec) {}), Pass, "HTTP 200")
		expect(t, host+" wrong name", run(goodAddr, func(s *ipvsmgr.CheckSpec) { s.SNI, s.TLSVerify = "other.test", true }), Fail, "TLS: certificate is not for other.test")
		plain := httptest.NewUnstartedServer(http.NotFoundHandler())
		plain.Listener = listen(t, "tcp", host)
		plain.Start()
		t.Cleanup(plain.Close)
		expect(t, host+" plain http", run(plain.Listener.Addr().String(), func(s *ipvsmgr.CheckSpec) {}), Fail, "TLS: the server does not speak TLS")
	}
}

// lineServer answers each connection with reply(first line it reads), or
// nothing at all when reply is nil.
func lineServer(t *testing.T, host string, reply func(line string) string) string {
	ln := listen(t, "tcp", host)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(5 * time.Second))
				line, _ := bufio.NewReader(conn).ReadString('\n')
				if reply == nil {
					time.Sleep(2 * time.Second)
					return
				}
				fmt.Fprint(conn, reply(line))
			}()
		}
	}()
	return ln.Addr().String()
}

func TestSendExpectTCP(t *testing.T) {
	c := &Checker{}
	for _, host := range loopbacks(t) {
		addr := lineServer(t, host, func(line string) string {
			if strings.HasPrefix(line, "GET ") {
				return "HTTP/1.0 200 OK\r\nServer: test\r\n\r\n"
			}
			return "ERR what\r\n"
		})
		silent := lineServer(t, host, nil)
		run := func(addr, send, exp string, re bool) Result {
			s := specFor("send_expect", addr)
			s.Protocol, s.Send, s.Expect, s.UseRegex = "tcp", send, exp, re
			s.Timeout = 300 * time.Millisecond
			return c.Run(context.Background(), s)
		}
		get := ipvsmgr.DecodeEscapes(`GET / HTTP/1.0\r\n\r\n`)
		expect(t, host+" prefix", run(addr, get, "HTTP/1.0 200", false), Pass, "reply matched")
		expect(t, host+" wrong prefix", run(addr, get, "HTTP/1.1", false), Fail, `reply did not match: "HTTP/1.0 200 OK"`)
		expect(t, host+" other command", run(addr, "HELO\n", "HTTP", false), Fail, `reply did not match: "ERR what"`)
		expect(t, host+" anything", run(addr, "HELO\n", "*", false), Pass, "reply matched")
		expect(t, host+" regex", run(addr, get, `20[0-9] OK\r\nServer`, true), Pass, "reply matched")
		expect(t, host+" regex mismatch", run(addr, get, `^5\d\d`, true), Fail, "reply did not match")
		expect(t, host+" silent", run(silent, get, "HTTP", false), Fail, "timeout after 300ms")
		expect(t, host+" refused", run(closedPort(t, "tcp", host), get, "HTTP", false), Fail, "connection refused")
	}
}

func TestSendExpectUDP(t *testing.T) {
	c := &Checker{}
	for _, host := range loopbacks(t) {
		pc, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		go func() {
			buf := make([]byte, 1500)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				pc.WriteTo(buf[:n], from) // echo
			}
		}()
		run := func(addr, exp string) Result {
			s := specFor("send_expect", addr)
			s.Protocol, s.Send, s.Expect = "udp", "ping\n", exp
			s.Timeout = 300 * time.Millisecond
			return c.Run(context.Background(), s)
		}
		expect(t, host+" echo", run(pc.LocalAddr().String(), "ping"), Pass, "reply matched")
		expect(t, host+" wrong reply", run(pc.LocalAddr().String(), "pong"), Fail, `reply did not match: "ping"`)
		expect(t, host+" closed port", run(closedPort(t, "udp", host), "ping"), Fail, "connection refused")
	}
}

// dnsResponder is a tiny DNS server: ok.test has an A record, empty.test no
// records, anything else is NXDOMAIN.
func dnsResponder(t *testing.T, host string) string {
	pc, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var q dnsmessage.Message
			if q.Unpack(buf[:n]) != nil || len(q.Questions) != 1 {
				continue
			}
			r := dnsmessage.Message{Header: dnsmessage.Header{ID: q.ID, Response: true, Authoritative: true}, Questions: q.Questions}
			switch q.Questions[0].Name.String() {
			case "ok.test.":
				r.Answers = []dnsmessage.Resource{{
					Header: dnsmessage.ResourceHeader{Name: q.Questions[0].Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
					Body:   &dnsmessage.AResource{A: [4]byte{198, 18, 0, 1}},
				}}
			case "empty.test.":
			default:
				r.RCode = dnsmessage.RCodeNameError
			}
			out, _ := r.Pack()
			pc.WriteTo(out, from)
		}
	}()
	return pc.LocalAddr().String()
}

func TestDNS(t *testing.T) {
	c := &Checker{}
	for _, host := range loopbacks(t) {
		addr := dnsResponder(t, host)
		run := func(name, qtype, rcode string) Result {
			s := specFor("dns", addr)
			s.Protocol, s.Name, s.QType, s.RCode = "udp", name, qtype, rcode
			return c.Run(context.Background(), s)
		}
		expect(t, host+" answer", run("ok.test", "A", ""), Pass, "DNS NOERROR, 1 answer")
		expect(t, host+" no AAAA", run("ok.test", "AAAA", ""), Fail, "DNS: no AAAA answer")
		expect(t, host+" empty", run("empty.test", "A", ""), Fail, "DNS: no A answer")
		expect(t, host+" nxdomain", run("gone.test", "A", ""), Fail, "DNS NXDOMAIN")
		expect(t, host+" nxdomain expected", run("gone.test", "A", "NXDOMAIN"), Pass, "DNS NXDOMAIN")
		expect(t, host+" rcode differs", run("ok.test", "A", "NXDOMAIN"), Fail, "DNS NOERROR")
		s := specFor("dns", closedPort(t, "udp", host))
		s.Protocol, s.Name, s.QType = "udp", "ok.test", "A"
		expect(t, host+" closed", c.Run(context.Background(), s), Fail, "connection refused")
	}
}

func writeScript(t *testing.T, dir, name, body string) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// gone waits (bounded) until pid is dead: no such process, or a zombie.
func gone(pid int) bool {
	for range 100 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	for range 100 {
		b, err := os.ReadFile(path)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no pid in %s", path)
	return 0
}

func TestExec(t *testing.T) {
	dir := t.TempDir()
	args := filepath.Join(dir, "args")
	c := &Checker{}
	run := func(timeout time.Duration, dynamic bool, argv ...string) Result {
		s := specFor("exec", "198.18.0.11:80")
		s.Command, s.Timeout, s.DynamicWeight = argv, timeout, dynamic
		return c.Run(context.Background(), s)
	}
	ok := writeScript(t, dir, "ok.sh", `echo "$@" > `+args+`; exit 0`)
	expect(t, "pass", run(time.Second, false, ok, "198.18.0.11", "80"), Pass, "exit status 0")
	if b, _ := os.ReadFile(args); string(b) != "198.18.0.11 80\n" {
		t.Errorf("arguments: %q", b)
	}
	expect(t, "exit 3", run(time.Second, false, writeScript(t, dir, "fail.sh", "exit 3")), Fail, "exit status 3")
	dyn := writeScript(t, dir, "dyn.sh", "exit 7")
	if r := run(time.Second, true, dyn); r.Outcome != Pass || r.Weight != 5 {
		t.Errorf("dynamic weight: %+v, want a pass with weight 5", r)
	}
	if r := run(time.Second, false, dyn); r.Outcome != Fail || r.Weight != -1 {
		t.Errorf("exit 7 without dynamic_weight: %+v, want a failure", r)
	}
	if r := run(time.Second, true, writeScript(t, dir, "one.sh", "exit 1")); r.Outcome != Fail {
		t.Errorf("exit 1 with dynamic_weight: %+v, want a failure", r)
	}
	expect(t, "not found", run(time.Second, false, filepath.Join(dir, "missing")), Fault, "not found")
	noexec := filepath.Join(dir, "noexec.sh")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	if os.Geteuid() != 0 { // root may run anything
		expect(t, "not executable", run(time.Second, false, noexec), Fault, "permission denied")
	}
	start := time.Now()
	expect(t, "hang", run(300*time.Millisecond, false, writeScript(t, dir, "hang.sh", "exec sleep 30")), Fail, "timeout after 300ms")
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("a hung command took %v to cut with a 300ms timeout", took)
	}
	// A child that hangs on after the command is killed goes with it.
	pidFile := filepath.Join(dir, "child.pid")
	start = time.Now()
	expect(t, "forked child", run(300*time.Millisecond, false, writeScript(t, dir, "fork.sh", "sleep 30 & echo $! > "+pidFile+"; wait")), Fail, "timeout after 300ms")
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("a command with a hung child took %v to cut", took)
	}
	if pid := readPid(t, pidFile); !gone(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the child %d outlived the check", pid)
	}
	// So does one left behind by a command that passed.
	pidFile2 := filepath.Join(dir, "left.pid")
	expect(t, "left child", run(time.Second, false, writeScript(t, dir, "leave.sh", "sleep 30 & echo $! > "+pidFile2+"; exit 0")), Pass, "exit status 0")
	if pid := readPid(t, pidFile2); !gone(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the child %d outlived the check", pid)
	}
}

func TestAgent(t *testing.T) {
	c := &Checker{}
	for _, host := range loopbacks(t) {
		for _, tc := range []struct {
			reply   string
			outcome Outcome
			reason  string
			percent int
		}{
			{"up\n", Pass, "agent: up", -1},
			{"up 75%\n", Pass, "agent: up 75%", 75},
			{"50%\r\n", Pass, "agent: 50%", 50},
			{"drain\n", Pass, "agent: drain", 0},
			{"ready,120%\n", Pass, "agent: ready,120%", 120},
			{"down#disk full\n", Fail, "agent: down (disk full)", -1},
			{"maint\n", Fail, "agent: maint", -1},
			{"stopped 10%", Fail, "agent: stopped", -1},
			{"hello\n", Fail, `agent: no state or weight in "hello"`, -1},
			{"", Fail, "agent: empty reply", -1},
		} {
			reply := tc.reply
			ln := listen(t, "tcp", host)
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				fmt.Fprint(conn, reply)
				conn.Close()
			}()
			r := c.Run(context.Background(), specFor("agent", ln.Addr().String()))
			expect(t, host+" "+strconv.Quote(tc.reply), r, tc.outcome, tc.reason)
			if r.Outcome == Pass && r.Percent != tc.percent {
				t.Errorf("%s %q: percent %d, want %d", host, tc.reply, r.Percent, tc.percent)
			}
		}
		expect(t, host+" refused", c.Run(context.Background(), specFor("agent", closedPort(t, "tcp", host))), Fail, "connection refused")
	}
}

// Errors that say the director cannot check at all are faults, not failures.
func TestFaults(t *testing.T) {
	spec := specFor("tcp", "198.18.0.11:80")
	for _, tc := range []struct {
		err     error
		outcome Outcome
		reason  string
	}{
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}, Fault, "network unreachable"},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("socket", syscall.EMFILE)}, Fault, "out of file descriptors"},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}, Fail, "host unreachable"},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, Fail, "connection refused"},
	} {
		expect(t, tc.err.Error(), describe(context.Background(), spec, tc.err), tc.outcome, tc.reason)
	}
}

// TestExecExpect: an exec check with an expect compares the program's output
// as nanny compares send_program's: the output less its final newline equal
// to expect, or matching it with use_regex; a failing exit status fails.
func TestExecExpect(t *testing.T) {
	dir := t.TempDir()
	c := &Checker{}
	run := func(script, expectStr string, regex bool) Result {
		s := specFor("exec", "198.18.0.11:80")
		s.Command, s.Timeout = []string{writeScript(t, dir, fmt.Sprintf("s%d.sh", time.Now().UnixNano()), script)}, time.Second
		s.Expect, s.UseRegex = expectStr, regex
		return c.Run(context.Background(), s)
	}
	expect(t, "equal", run(`echo OK`, "OK", false), Pass, `output "OK`)
	expect(t, "longer", run(`echo OK then`, "OK", false), Fail, `is not the expected "OK"`)
	expect(t, "regex", run(`echo "load 0.42"`, `^load 0\.[0-9]+$`, true), Pass, "output")
	expect(t, "regex miss", run(`echo "load 3.1"`, `^load 0\.`, true), Fail, "is not the expected")
	expect(t, "no output", run(`exit 0`, "OK", false), Fail, `no output, expected "OK"`)
	expect(t, "any", run(`echo whatever`, "*", false), Pass, "output")
	expect(t, "exit status", run(`echo OK; exit 2`, "OK", false), Fail, "exit status 2")
	// A flood of output is cut, not kept.
	if r := run(`yes | head -c 1000000`, "y", false); r.Outcome != Fail {
		t.Errorf("flood: %+v", r)
	}
}

// TestSMTP: keepalived's SMTP_CHECK against a real listener: a 220
// greeting (multi-line too), HELO answered 250, then QUIT.
func TestSMTP(t *testing.T) {
	serve := func(greeting, heloReply string) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					c.SetDeadline(time.Now().Add(5 * time.Second))
					c.Write([]byte(greeting))
					r := bufio.NewReader(c)
					if line, err := r.ReadString('\n'); err != nil || line != "HELO checker.example\r\n" {
						c.Write([]byte("500 what\r\n"))
						return
					}
					c.Write([]byte(heloReply))
					r.ReadString('\n') // QUIT
				}()
			}
		}()
		return ln.Addr().String()
	}
	c := &Checker{}
	run := func(addr string) Result {
		s := specFor("smtp", addr)
		s.Name, s.Timeout = "checker.example", time.Second
		return c.Run(context.Background(), s)
	}
	expect(t, "good", run(serve("220 mx ESMTP\r\n", "250 mx hello\r\n")), Pass, "250 mx hello")
	expect(t, "multi-line greeting", run(serve("220-mx ESMTP\r\n220 ready\r\n", "250 ok\r\n")), Pass, "250 ok")
	expect(t, "busy", run(serve("421 too busy\r\n", "")), Fail, "greeting 421")
	expect(t, "helo refused", run(serve("220 mx\r\n", "550 go away\r\n")), Fail, "HELO answered 550")
}
