//go:build vmtest

package vmtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// A director pair: directors A (198.18.0.1) and B (198.18.0.3), the client
// (198.18.0.2) and DR real servers (198.18.0.11...) on one bridge, each in its
// own namespace. The real servers hold the VIP on lo with ARP hidden, serve
// HTTP on :80 and a line echo on :echoPort.
const (
	addrA    = "198.18.0.1"
	addrB    = "198.18.0.3"
	echoPort = 9000
)

type pair struct {
	t    *testing.T
	net  *lab // the client, the real servers, the stop functions
	sw   string
	a, b *lab // each director's namespace and database (sharing net's client and real servers)
}

func newPair(t *testing.T, nRS int) *pair {
	t.Helper()
	n := labSeq.Add(1)
	id := fmt.Sprintf("p%d", n)
	base := &lab{t: t, id: id, cli: id + "cli"}
	p := &pair{t: t, net: base, sw: id + "sw"}
	a, b := *base, *base
	a.dir, a.db = id+"dA", t.TempDir()+"/a.db"
	b.dir, b.db = id+"dB", t.TempDir()+"/b.db"
	p.a, p.b = &a, &b
	for i := range nRS {
		base.rs = append(base.rs, fmt.Sprintf("%s%s%d", id, rsPrefix, i+1))
	}
	names := append([]string{p.sw, a.dir, b.dir, base.cli}, base.rs...)
	for _, ns := range names {
		run(t, "ip", "netns", "add", ns)
		ns := ns
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		base.ns(ns, "ip link set lo up")
	}
	base.ns(p.sw, "ip link add br0 type bridge")
	base.ns(p.sw, "ip link set br0 up")
	plug := func(ns, addr string) {
		host := "v" + ns + "eth0"
		run(t, "ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns)
		run(t, "ip", "link", "set", host, "netns", p.sw)
		base.ns(p.sw, "ip link set "+host+" master br0 up")
		base.ns(ns, "ip addr add "+addr+"/24 dev eth0")
		base.ns(ns, "ip link set eth0 up")
	}
	plug(a.dir, addrA)
	plug(b.dir, addrB)
	plug(base.cli, labNet+".2")
	for i, ns := range base.rs {
		plug(ns, fmt.Sprintf("%s.%d", labNet, 11+i))
		base.ns(ns, "sysctl -qw net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2 net.ipv4.conf.eth0.arp_ignore=1 net.ipv4.conf.eth0.arp_announce=2")
		base.ns(ns, "ip addr add "+vip+"/32 dev lo")
		base.serveHTTP(ns, ns[len(id):])
		base.serveEcho(ns, ns[len(id):])
	}
	t.Cleanup(func() {
		for _, f := range base.stopFn {
			f()
		}
	})
	return p
}

// serveEcho answers each line on echoPort with "NAME LINE".
func (l *lab) serveEcho(ns, name string) {
	var ln net.Listener
	var err error
	inNS(l.t, ns, func() { ln, err = net.Listen("tcp", ":"+strconv.Itoa(echoPort)) })
	if err != nil {
		l.t.Fatalf("listen in %s: %v", ns, err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := fmt.Fprintf(c, "%s %s\n", name, sc.Text()); err != nil {
						return
					}
				}
			}()
		}
	}()
	l.stopFn = append(l.stopFn, func() { ln.Close() })
}

// link sets the switch's side of a director's cable up or down (netlink, no exec).
func (p *pair) link(d *lab, up bool) {
	p.t.Helper()
	h, err := netns.GetFromName(p.sw)
	if err != nil {
		p.t.Fatal(err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		p.t.Fatal(err)
	}
	defer nh.Close()
	l, err := nh.LinkByName("v" + d.dir + "eth0")
	if err != nil {
		p.t.Fatal(err)
	}
	if up {
		err = nh.LinkSetUp(l)
	} else {
		err = nh.LinkSetDown(l)
	}
	if err != nil {
		p.t.Fatal(err)
	}
}

// hasVIP says whether the director holds the VIP on eth0.
func hasVIP(t *testing.T, d *lab) bool {
	out, err := exec.Command("ip", "-n", d.dir, "-o", "addr", "show", "dev", "eth0").CombinedOutput()
	if err != nil {
		t.Logf("ip addr in %s: %v %s", d.dir, err, out)
		return false
	}
	return strings.Contains(string(out), " "+vip+"/")
}

// cmdOut runs ipvsctl against a director's database and fails the test on an error.
func (l *lab) cmdOut(args ...string) string {
	l.t.Helper()
	out, err := l.ipvsctl(args...)
	if err != nil {
		l.t.Fatalf("ipvsctl %s in %s: %v\n%s", strings.Join(args, " "), l.dir, err, out)
	}
	return out
}

// peerToken makes a viewer user on the director and returns a token for it:
// what the other director presents to replicate from this one.
func (l *lab) peerToken() string {
	l.t.Helper()
	bin := os.Getenv("IPVSCTL_BIN")
	cmd := exec.Command("ip", "netns", "exec", l.dir, bin, "--db", l.db, "user", "add", "peer", "--role", "viewer", "--password-stdin")
	cmd.Stdin = strings.NewReader("peer-password-for-the-test\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		l.t.Fatalf("user add: %v\n%s", err, out)
	}
	cmd = exec.Command("ip", "netns", "exec", l.dir, bin, "--db", l.db, "token", "create", "--user", "peer", "--name", "peer")
	out, err := cmd.Output()
	if err != nil {
		l.t.Fatalf("token create: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// nodes gives A and B their priorities, addresses and each other as peer.
func (p *pair) nodes(prioA, prioB int) {
	p.t.Helper()
	tokA, tokB := p.a.peerToken(), p.b.peerToken()
	// Each pins the other's certificate (serve listens with TLS off loopback).
	fpA, fpB := p.a.fingerprint(), p.b.fingerprint()
	p.a.cmdOut("node", "set", "--priority", strconv.Itoa(prioA), "--address", addrA, "--peer-url", "https://"+addrB+":3636",
		"--peer-token", tokB, "--peer-fingerprint", fpB)
	p.b.cmdOut("node", "set", "--priority", strconv.Itoa(prioB), "--address", addrB, "--peer-url", "https://"+addrA+":3636",
		"--peer-token", tokA, "--peer-fingerprint", fpA)
}

// fingerprint is the director's own certificate's, as node show prints it
// for the peer's operator.
func (l *lab) fingerprint() string {
	l.t.Helper()
	var v struct {
		Fingerprint string `json:"fingerprint"`
	}
	if err := json.Unmarshal([]byte(l.cmdOut("node", "show", "--json")), &v); err != nil || !strings.HasPrefix(v.Fingerprint, "sha256:") {
		l.t.Fatalf("node show --json: fingerprint %q, %v", v.Fingerprint, err)
	}
	return v.Fingerprint
}

// director is one `ipvsctl serve` of the pair, which the tests kill and restart.
type director struct {
	l    *lab
	addr string
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{}
	all  []string // logs of earlier runs
	args []string // more flags for serve
	env  []string // more environment for serve (the fault matrix's injection points)
}

func (p *pair) director(l *lab, addr string) *director {
	d := &director{l: l, addr: addr}
	p.t.Cleanup(func() {
		d.stop(syscall.SIGTERM)
		if p.t.Failed() || os.Getenv("IPVSCTL_VMTEST_LOGS") != "" {
			p.t.Logf("%s daemon logs:\n%s", l.dir, strings.Join(d.all, "\n--- restarted ---\n"))
		}
	})
	return d
}

func (d *director) start() {
	t := d.l.t
	t.Helper()
	bin := os.Getenv("IPVSCTL_BIN")
	d.cmd = exec.Command("ip", append([]string{"netns", "exec", d.l.dir, bin, "--db", d.l.db, "serve", "--listen", d.addr + ":3636"}, d.args...)...)
	d.logs = &syncBuffer{}
	d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
	if len(d.env) > 0 {
		d.cmd.Env = append(os.Environ(), d.env...)
	}
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	d.done = done
	go func() { d.cmd.Wait(); close(done) }()
	waitFor(t, d.l.dir+"'s daemon socket", 30*time.Second, func() bool {
		c, err := net.Dial("unix", d.l.db+".sock")
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// stop signals the daemon (`ip netns exec` execs it: the process is ipvsctl's) and waits for it.
func (d *director) stop(sig syscall.Signal) {
	if d.cmd == nil {
		return
	}
	d.cmd.Process.Signal(sig)
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
	}
	d.all = append(d.all, d.logs.String())
	d.cmd = nil
}

// holder is a long-lived TCP connection from the client: a numbered line
// every 100 ms (holdEvery: another period), each echo checked (same real
// server, same number, in order).
type holder struct {
	c        net.Conn
	mu       sync.Mutex
	sent     int
	echoed   int
	server   string
	err      error
	last     time.Time
	maxGap   time.Duration
	stopOnce sync.Once
	stop     chan struct{}
}

func (l *lab) hold(addr string) *holder {
	l.t.Helper()
	return l.holdEvery(addr, 100*time.Millisecond)
}

func (l *lab) holdEvery(addr string, every time.Duration) *holder {
	l.t.Helper()
	h, err := l.tryHold(addr, every)
	if err != nil {
		l.t.Fatalf("long-lived connection to %s: %v", addr, err)
	}
	return h
}

func (l *lab) tryHold(addr string, every time.Duration) (*holder, error) {
	c, err := l.dial(addr)
	if err != nil {
		return nil, err
	}
	h := &holder{c: c, stop: make(chan struct{}), last: time.Now()}
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-h.stop:
				return
			case <-tick.C:
			}
			c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := fmt.Fprintf(c, "%d\n", n); err != nil {
				h.fail(fmt.Errorf("write line %d: %w", n, err))
				return
			}
			h.mu.Lock()
			h.sent = n
			h.mu.Unlock()
		}
	}()
	go func() {
		r := bufio.NewReader(c)
		for n := 1; ; n++ {
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			line, err := r.ReadString('\n')
			if err != nil {
				select {
				case <-h.stop:
				default:
					h.fail(fmt.Errorf("read echo %d: %w", n, err))
				}
				return
			}
			name, num, _ := strings.Cut(strings.TrimSpace(line), " ")
			h.mu.Lock()
			if h.server == "" {
				h.server = name
			}
			if name != h.server || num != strconv.Itoa(n) {
				h.mu.Unlock()
				h.fail(fmt.Errorf("echo %d: got %q from %s, want %d from %s", n, num, name, n, h.server))
				return
			}
			now := time.Now()
			h.maxGap = max(h.maxGap, now.Sub(h.last))
			h.last, h.echoed = now, n
			h.mu.Unlock()
		}
	}()
	return h, nil
}

func (h *holder) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = err
	}
}

func (h *holder) state() (echoed int, gap time.Duration, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.echoed, h.maxGap, h.err
}

func (h *holder) close() {
	h.stopOnce.Do(func() { close(h.stop); h.c.Close() })
}

// firstAnswer polls http://VIP/ from the client: a new connection every
// 10 ms (each in its own goroutine, 200 ms to connect, 300 ms to answer;
// with l.answerWait every 50 ms, that long each)
// until one started at or after from is answered; it returns when that
// answer came.
func (l *lab) firstAnswer(from time.Time, limit time.Duration) (time.Time, error) {
	type ans struct{ at time.Time }
	got := make(chan ans, 1)
	stop := make(chan struct{})
	defer close(stop)
	every := 10 * time.Millisecond
	if l.answerWait > 0 {
		every = 50 * time.Millisecond // fewer dials in flight, each waiting longer
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	deadline := time.After(limit)
	for {
		select {
		case a := <-got:
			return a.at, nil
		case <-deadline:
			return time.Time{}, fmt.Errorf("no answer through the VIP within %s", limit)
		case <-tick.C:
		}
		go func() {
			started := time.Now()
			if !l.answersOnce(vip) {
				return
			}
			at := time.Now()
			if started.Before(from) {
				return
			}
			select {
			case got <- ans{at}:
			case <-stop:
			default:
			}
		}()
	}
}

// answersOnce says whether one HTTP request from the client through vip:80
// is answered with a 200 within half a second (l.answerWait: twice that).
func (l *lab) answersOnce(vip string) bool {
	dial, answer := 200*time.Millisecond, 300*time.Millisecond
	if l.answerWait > 0 {
		dial, answer = l.answerWait, l.answerWait
	}
	var c net.Conn
	var err error
	inNS(l.t, l.cli, func() { c, err = net.DialTimeout("tcp", vip+":80", dial) })
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(answer))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: vip\r\nConnection: close\r\n\r\n"); err != nil {
		return false
	}
	buf := make([]byte, 12)
	_, err = io.ReadFull(c, buf)
	return err == nil && string(buf) == "HTTP/1.1 200"
}
