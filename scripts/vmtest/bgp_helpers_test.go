//go:build vmtest

package vmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// bgpOpts shape the directors' desired state in an ECMP test.
type bgpOpts struct {
	scheduler string  // "" leaves BGP mode's default (mh)
	bfd       float64 // BFD interval in seconds; 0 runs the session without BFD
	hold      int     // BGP hold time in seconds
	check     bool    // an HTTP check of each real server on bgpCheckPort
	quorum    int     // real servers a service needs up (0: the default, 1)
	// v6 adds an IPv6 peer (the router's bgpRouter6, no BFD) and a web
	// service on vip6, DR to the real servers' IPv6 addresses.
	v6 bool
}

// bgpCheckPort is where the real servers of an ECMP test answer the directors'
// checks (serveChecks).
const bgpCheckPort = 8090

// bgpDoc is the ECMP tests' state: BFD 1 s x 3, hold time 9 s.
func bgpDoc() string { return bgpDocWith(bgpOpts{bfd: 1, hold: 9}) }

func bgpDocWith(o bgpOpts) string {
	var rs []string
	for i := range 3 {
		rs = append(rs, fmt.Sprintf(`{"name": "rs%d", "address": "%s.%d"}`, i+1, labNet, 11+i))
	}
	servers := strings.Join(rs, ", ")
	peer := fmt.Sprintf(`{"address": %q, "asn": 65000, "hold_time": %d`, bgpRouter, o.hold)
	if o.bfd > 0 {
		peer += fmt.Sprintf(`, "bfd": {"interval": %g, "multiplier": 3}`, o.bfd)
	}
	peer += "}"
	if o.v6 {
		peer += fmt.Sprintf(`, {"address": %q, "asn": 65000, "hold_time": %d}`, bgpRouter6, o.hold)
	}
	var extra string
	if o.scheduler != "" {
		extra += fmt.Sprintf(`"scheduler": %q, `, o.scheduler)
	}
	if o.check {
		extra += fmt.Sprintf(`"check": {"type": "http", "path": "/", "port": %d, "interval": 3, "timeout": 2.5, "rise": 2, "fall": 3}, `, bgpCheckPort)
	}
	if o.quorum > 0 {
		extra += fmt.Sprintf(`"quorum": %d, `, o.quorum)
	}
	var web6 string
	if o.v6 {
		var rs6 []string
		for i := range 3 {
			rs6 = append(rs6, fmt.Sprintf(`{"name": "rs%d", "address": "%s:%x"}`, i+1, labNet6, 0x11+i))
		}
		web6 = fmt.Sprintf(`,
	    {"name": "web6", "protocol": "tcp", "address": "%s", "port": 80, %s"servers": [%s]}`, vip6, extra, strings.Join(rs6, ", "))
	}
	return fmt.Sprintf(`{"settings": {"network": "dr", "bgp": {"asn": 65001, "communities": ["65000:100"], "peers": [%s]}},
	  "services": [
	    {"name": "web", "protocol": "tcp", "address": "%s", "port": 80, %s"servers": [%s]},
	    {"name": "echo", "protocol": "tcp", "address": "%s", "port": %d, %s"servers": [%s]}%s]}`,
		peer, vip, extra, servers, vip, echoPort, extra, servers, web6)
}

// up applies doc to the three directors, starts their daemons and waits
// until the router has the three nexthops and BFD peers (when doc has BFD)
// and each director reports its session established.
func (e *ecmp) up(doc string) {
	t := e.t
	t.Helper()
	for i, d := range e.dirs {
		d.apply(doc)
		d.cmdOut("node", "set", "--router-id", bgpDirectors[i], "--bgp-source", bgpDirectors[i])
		if got := strings.TrimSpace(e.base.ns(d.dir, "sysctl -n net.ipv4.vs.sloppy_tcp")); got != "1" {
			t.Errorf("%s: net.ipv4.vs.sloppy_tcp = %s, want 1", d.dir, got)
		}
		if out := e.base.ns(d.dir, "ip -o addr show dev lo"); !strings.Contains(out, vip+"/32") {
			t.Errorf("%s: the VIP is not on lo:\n%s", d.dir, out)
		}
		dd := &director{l: d, addr: bgpDirectors[i]}
		t.Cleanup(func() {
			dd.stop(syscall.SIGTERM)
			if t.Failed() || os.Getenv("IPVSCTL_VMTEST_LOGS") != "" {
				t.Logf("%s daemon logs:\n%s", d.dir, strings.Join(dd.all, "\n--- restarted ---\n"))
			}
		})
		dd.start()
		e.ds = append(e.ds, dd)
	}
	if saved := e.dirs[0].saved(); !strings.Contains(doc, `"scheduler"`) && (!strings.Contains(saved, "-s mh") || !strings.Contains(saved, "mh-port")) {
		t.Errorf("BGP mode should default to mh with port:\n%s", saved)
	}
	start := time.Now()
	waitFor(t, "three ECMP nexthops for the VIP at the router", 60*time.Second, func() bool { return len(e.nexthops()) == 3 })
	t.Logf("three nexthops %v after %s", e.nexthops(), time.Since(start).Round(time.Millisecond))
	withBFD := strings.Contains(doc, `"bfd"`) && !e.o.noBFD
	if withBFD {
		waitFor(t, "three BFD sessions up at the router", 30*time.Second, func() bool { return e.bfdUp() == 3 })
	}
	for _, d := range e.dirs {
		waitFor(t, d.dir+"'s node show to report the session", 20*time.Second, func() bool { return e.sessionUp(d, withBFD) })
	}
}

// sessionUp says whether director d's node show reports its BGP sessions
// established (one, and one over IPv6 with ecmpOpts.v6), BFD up on the
// IPv4 one (with bfd), and the VIPs announced.
func (e *ecmp) sessionUp(d *lab, bfd bool) bool {
	var v struct {
		BGP struct {
			Announced int `json:"announced"`
			Peers     []struct {
				State string `json:"state"`
				BFD   string `json:"bfd"`
			} `json:"peers"`
		} `json:"bgp"`
	}
	out, err := d.ipvsctl("node", "show", "--json")
	if err != nil || json.Unmarshal([]byte(out), &v) != nil {
		return false
	}
	want := 1
	if e.o.v6 {
		want = 2
	}
	if v.BGP.Announced != want || len(v.BGP.Peers) != want {
		return false
	}
	for _, p := range v.BGP.Peers {
		if p.State != "established" {
			return false
		}
	}
	return !bfd || v.BGP.Peers[0].BFD == "up"
}

// announces says whether director d decides to announce the VIP, and why
// not (node show's vips).
func (e *ecmp) announces(d *lab) (bool, string) {
	var v struct {
		BGP struct {
			VIPs []struct {
				Announce bool   `json:"announce"`
				Reason   string `json:"reason"`
			} `json:"vips"`
		} `json:"bgp"`
	}
	out, err := d.ipvsctl("node", "show", "--json")
	if err != nil || json.Unmarshal([]byte(out), &v) != nil {
		return false, fmt.Sprintf("node show: %v %s", err, out)
	}
	if len(v.BGP.VIPs) != 1 {
		return false, fmt.Sprintf("%d VIPs in node show", len(v.BGP.VIPs))
	}
	return v.BGP.VIPs[0].Announce, v.BGP.VIPs[0].Reason
}

// routes reads the router's nexthops for the VIP over netlink: cheaper than
// exec'ing ip (40 ms a program in the VM), so it can be polled every 10 ms.
type routes struct {
	h  *netlink.Handle
	ns netns.NsHandle
}

func (e *ecmp) routes() *routes {
	e.t.Helper()
	ns, err := netns.GetFromName(e.rtr)
	if err != nil {
		e.t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		e.t.Fatal(err)
	}
	r := &routes{h: h, ns: ns}
	e.t.Cleanup(func() { h.Close(); ns.Close() })
	return r
}

// hops are the VIP's nexthops; nil when the router has no route for it.
func (r *routes) hops() []string {
	dst := &net.IPNet{IP: net.ParseIP(vip).To4(), Mask: net.CIDRMask(32, 32)}
	rs, err := r.h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: dst}, netlink.RT_FILTER_DST)
	if err != nil {
		return nil
	}
	var out []string
	for _, rt := range rs {
		if rt.Gw != nil {
			out = append(out, rt.Gw.String())
		}
		for _, nh := range rt.MultiPath {
			out = append(out, nh.Gw.String())
		}
	}
	return out
}

// bfdPeer is one of FRR's BFD peers with its counters.
type bfdPeer struct {
	Peer       string `json:"peer"`
	Status     string `json:"status"`
	Diagnostic string `json:"diagnostic"`
	RemoteDiag string `json:"remote-diagnostic"`
	Down       int    `json:"session-down"`
	Up         int    `json:"session-up"`
}

// bfdPeers is FRR's view of its BFD peers: the state and diagnostics of
// `show bfd peers` with the session-up/down counts of its counters.
func (e *ecmp) bfdPeers() map[string]bfdPeer {
	var peers, counters []bfdPeer
	json.Unmarshal([]byte(e.vtysh("show bfd peers json")), &peers)
	json.Unmarshal([]byte(e.vtysh("show bfd peers counters json")), &counters)
	out := map[string]bfdPeer{}
	for _, p := range peers {
		out[p.Peer] = p
	}
	for _, c := range counters {
		p := out[c.Peer]
		p.Peer, p.Down, p.Up = c.Peer, c.Down, c.Up
		out[c.Peer] = p
	}
	return out
}

// checkFaults are the real servers' answers to the directors' checks:
// an entry "rs1 198.18.0.5" makes rs1 answer 503 to that director.
type checkFaults struct {
	mu   sync.Mutex
	fail map[string]bool
	slow map[string]bool // answered 2 s late (passing): a first check that passes late
}

func (c *checkFaults) setSlow(rs, director string, slow bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slow[rs+" "+director] = slow
}

func (c *checkFaults) slowed(rs, director string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slow[rs+" "+director]
}

func (c *checkFaults) set(rs, director string, failing bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail[rs+" "+director] = failing
}

func (c *checkFaults) failing(rs, director string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fail[rs+" "+director]
}

// serveChecks answers the directors' HTTP checks on bgpCheckPort of each real
// server: 200, or 503 to a director its entry in e.checks fails.
func (e *ecmp) serveChecks() {
	e.checks = &checkFaults{fail: map[string]bool{}, slow: map[string]bool{}}
	for _, ns := range e.base.rs {
		name := ns[len(e.base.id):]
		var ln net.Listener
		var err error
		inNS(e.t, ns, func() { ln, err = net.Listen("tcp", ":"+strconv.Itoa(bgpCheckPort)) })
		if err != nil {
			e.t.Fatalf("listen in %s: %v", ns, err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			if e.checks.slowed(name, host) {
				time.Sleep(2 * time.Second)
			}
			if e.checks.failing(name, host) {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			io.WriteString(w, name)
		}), ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		e.base.stopFn = append(e.base.stopFn, func() { srv.Close() })
	}
}

// holdMany opens n long-lived connections to the VIP's echo port from the
// client, a line every `every` on each, and waits until each has echoed two.
// The connections open 50 ms apart, a connection that fails to open is
// tried again (up to 5 times), and one that breaks before it has echoed two
// is replaced (up to 3 rounds): opening them is not what is tested, a VM
// starved of CPU loses a handshake now and then, and under a scheduler that
// is not a consistent hash a BFD flap while they open breaks some.
func (e *ecmp) holdMany(n int, every time.Duration) []*holder {
	e.t.Helper()
	hs := make([]*holder, n)
	e.t.Cleanup(func() {
		for _, h := range hs {
			if h != nil {
				h.close()
			}
		}
	})
	retried, replaced := 0, 0
	open := func(i int) {
		for try := 1; ; try++ {
			h, err := e.base.tryHold(fmt.Sprintf("%s:%d", vip, echoPort), every)
			if err == nil {
				hs[i] = h
				return
			}
			if try == 5 {
				e.t.Fatalf("long-lived connection %d of %d: %v (tried 5 times)", i+1, n, err)
			}
			retried++
		}
	}
	for i := range hs {
		open(i)
		time.Sleep(50 * time.Millisecond)
	}
	for round := 1; ; round++ {
		var broken []int
		waitFor(e.t, fmt.Sprintf("%d long-lived connections to echo", n), 60*time.Second, func() bool {
			broken = broken[:0]
			for i, h := range hs {
				ec, _, err := h.state()
				if err != nil {
					broken = append(broken, i)
				} else if ec < 2 {
					return false
				}
			}
			return true
		})
		if len(broken) == 0 {
			break
		}
		if round == 3 {
			if !e.tolerateBroken {
				e.t.Fatalf("%d long-lived connections broke before they echoed twice, 3 rounds in a row", len(broken))
			}
			e.t.Logf("%d long-lived connections broke before they echoed twice, 3 rounds in a row: going on with the others", len(broken))
			var alive []*holder
			for i, h := range hs {
				if slices.Contains(broken, i) {
					h.close()
				} else {
					alive = append(alive, h)
				}
			}
			hs = alive
			break
		}
		for _, i := range broken {
			hs[i].close()
			open(i)
			replaced++
		}
	}
	if retried+replaced > 0 {
		e.t.Logf("of %d long-lived connections, %d attempts to open were tried again and %d broken ones replaced", n, retried, replaced)
	}
	return hs
}

// settle waits until no BGP session at the router has come up again for
// quiet (FRR's established counts): a session is reset once just after it
// first comes up (see docs/bgp.md, "BFD under emulation"), and the connections should open after.
func (e *ecmp) settle(quiet time.Duration) {
	e.t.Helper()
	last, since := e.bgpUps(), time.Now()
	waitFor(e.t, fmt.Sprintf("the BGP sessions to stay up %s", quiet), 90*time.Second, func() bool {
		now := e.bgpUps()
		for a, n := range now {
			if n != last[a] {
				last, since = now, time.Now()
				return false
			}
		}
		return time.Since(since) >= quiet
	})
}

// carriers says which director carries each long-lived connection: the one
// whose IPVS connection entry for the client's port has the most time left
// (`ipvsadm -Lnc`; an entry a director saw last before a flow moved ages).
// -1 for a connection no director has.
func (e *ecmp) carriers(hs []*holder) []int {
	e.t.Helper()
	type entry struct {
		dir  int
		left int // seconds
	}
	best := map[string]entry{}
	for i, d := range e.dirs {
		if e.ds[i].cmd == nil {
			continue // a dead director's table is not read
		}
		out := e.base.ns(d.dir, "ipvsadm -Lnc")
		for _, line := range strings.Split(out, "\n") {
			// "TCP 14:59  ESTABLISHED 198.19.1.2:45678  198.18.0.100:9000  198.18.0.11:9000"
			f := strings.Fields(line)
			if len(f) != 6 || f[0] != "TCP" || f[4] != fmt.Sprintf("%s:%d", vip, echoPort) {
				continue
			}
			m, s, _ := strings.Cut(f[1], ":")
			mm, _ := strconv.Atoi(m)
			ss, _ := strconv.Atoi(s)
			if b, ok := best[f[3]]; !ok || mm*60+ss > b.left {
				best[f[3]] = entry{i, mm*60 + ss}
			}
		}
	}
	out := make([]int, len(hs))
	for i, h := range hs {
		out[i] = -1
		if b, ok := best[h.c.LocalAddr().String()]; ok {
			out[i] = b.dir
		}
	}
	return out
}

// echoedNow is each connection's count of echoed lines.
func echoedNow(hs []*holder) []int {
	out := make([]int, len(hs))
	for i, h := range hs {
		out[i], _, _ = h.state()
	}
	return out
}

// keptSince waits (up to limit) until every connection has echoed more
// than `more` lines since before without an error, and returns which did.
func keptSince(hs []*holder, before []int, more int, limit time.Duration) []bool {
	kept := make([]bool, len(hs))
	deadline := time.Now().Add(limit)
	for {
		all := true
		for i, h := range hs {
			ec, _, err := h.state()
			kept[i] = err == nil && ec > before[i]+more
			all = all && kept[i]
		}
		if all || time.Now().After(deadline) {
			return kept
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// goneAt polls the router's nexthops every 10 ms until dead's is gone, and
// says when (zero after limit).
func (r *routes) goneAt(dead string, limit time.Duration) time.Time {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		found := false
		for _, h := range r.hops() {
			found = found || h == dead
		}
		if !found {
			return time.Now()
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}
}

// stall is one time stallProbe overslept by at least 200 ms.
type stall struct {
	at time.Time // when it woke
	d  time.Duration
}

// stallProbe sleeps `every` in a loop until ctx ends and returns the
// longest it overslept, and each oversleep of 200 ms or more: how long the
// VM (or this process) went without CPU.
func stallProbe(ctx context.Context, every time.Duration) (time.Duration, []stall) {
	var worst time.Duration
	var long []stall
	for ctx.Err() == nil {
		t0 := time.Now()
		time.Sleep(every)
		over := time.Since(t0) - every
		worst = max(worst, over)
		if over >= 200*time.Millisecond {
			long = append(long, stall{time.Now(), over})
		}
	}
	return worst, long
}

// bfdDowns are the BFD losses in a director's daemon log between from and
// to, each with the side that noticed it ("GoBGP expired": it heard nothing
// from FRR for its detection time; "FRR said down": FRR heard nothing from
// it) and the longest stall of stalls in the detection time before it.
func bfdDowns(d *director, from, to time.Time, detect time.Duration, stalls []stall) []string {
	var out []string
	for _, line := range strings.Split(d.logs.String(), "\n") {
		var who string
		switch {
		case strings.Contains(line, "msg=Expired"):
			who = "GoBGP expired"
		case strings.Contains(line, `msg="Remote peer signaled BFD down"`):
			who = "FRR said down"
		default:
			continue
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || at.Before(from) || at.After(to) {
			continue
		}
		var worst time.Duration
		for _, s := range stalls {
			if !s.at.Before(at.Add(-detect)) && !s.at.After(at.Add(time.Second)) {
				worst = max(worst, s.d)
			}
		}
		out = append(out, fmt.Sprintf("%s %s at %s (longest stall around it %s)", d.addr, who, at.Format("15:04:05.000"), worst.Round(time.Millisecond)))
	}
	return out
}

// destOrder is the echo service's real servers in director d's kernel list
// order with their weights (`ipvsadm -Ln --nosort`: without it ipvsadm
// sorts them): mh builds its Maglev table walking this list, so the
// directors of a group must agree.
func (e *ecmp) destOrder(d *lab) []string {
	e.t.Helper()
	var out []string
	in := false
	for _, line := range strings.Split(e.base.ns(d.dir, "ipvsadm -Ln --nosort"), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "TCP":
			in = f[1] == fmt.Sprintf("%s:%d", vip, echoPort)
		case in && len(f) >= 4 && f[0] == "->" && f[1] != "RemoteAddress:Port":
			out = append(out, f[1]+"/"+f[3])
		}
	}
	return out
}

// flowDests is, per long-lived connection, the real server of its IPVS
// connection entry on each director that has one (index: director; "" for
// none): which director saw it and where that director sends it.
func (e *ecmp) flowDests(hs []*holder) [][]string {
	e.t.Helper()
	out := make([][]string, len(hs))
	for i := range out {
		out[i] = make([]string, len(e.dirs))
	}
	port := map[string]int{}
	for i, h := range hs {
		port[h.c.LocalAddr().String()] = i
	}
	for di, d := range e.dirs {
		if e.ds[di].cmd == nil {
			continue
		}
		for _, line := range strings.Split(e.base.ns(d.dir, "ipvsadm -Lnc"), "\n") {
			f := strings.Fields(line)
			if len(f) != 6 || f[0] != "TCP" || f[4] != fmt.Sprintf("%s:%d", vip, echoPort) {
				continue
			}
			if i, ok := port[f[3]]; ok {
				out[i][di] = f[5]
			}
		}
	}
	return out
}

// outRsts is the TCP OutRsts counter of namespace ns (/proc/net/snmp):
// how many resets its own stack sent.
func (e *ecmp) outRsts(ns string) int {
	e.t.Helper()
	var names []string
	for _, line := range strings.Split(e.base.ns(ns, "cat /proc/net/snmp"), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "OutRsts" && i < len(f) {
				v, _ := strconv.Atoi(f[i])
				return v
			}
		}
	}
	return -1
}
