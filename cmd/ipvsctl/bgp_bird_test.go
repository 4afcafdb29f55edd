package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// Tier 2 (root, the host's kernel, no IPVS needed): BIRD 2 as the upstream
// router of three `ipvsctl serve` directors (fake IPVS kernels, real BGP
// and BFD from GoBGP), each in its own network namespace on one bridge in
// BIRD's namespace:
//
//	BIRD  br0 198.18.0.1/24 2001:db8::1/64, AS 65000, merge paths on
//	d1-d3 eth0 198.18.0.11-13, 2001:db8::11-13, AS 65001
//
// The VIPs 198.18.100.1/32 and 2001:db8:100::1/128 reach BIRD from every
// director with settings.bgp's community and MED and become one ECMP route
// each in BIRD's kernel table; BFD comes up on every session; node drain
// (AS-path prepend) shows the longer path at BIRD and takes that director's
// next hop out of the ECMP set, undrain puts it back; SIGTERM withdraws a
// director's routes while its sessions are still up; BFD takes a frozen
// director's routes away before the hold timer, and it rejoins.

var bgpNetnsSeq atomic.Int64

// birdNetns creates a network namespace deleted when the test ends.
func bgpNetns(t *testing.T, role string) string {
	t.Helper()
	name := fmt.Sprintf("bgp-%d-%d-%s", os.Getpid(), bgpNetnsSeq.Add(1), role)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return name
}

func netnsSh(t *testing.T, ctx context.Context, script string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("sh -c %q: %v\n%s", script, err, out)
	}
	return string(out)
}

// needRouterTools stops the test unless it runs as root (for network
// namespaces) and finds ip and tools (Debian's package pkg).
func needRouterTools(t *testing.T, pkg string, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Need(t, "needs root to create network namespaces")
	}
	for _, tool := range append([]string{"ip"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Needf(t, "needs %s (Debian's %s): %v", tool, pkg, err)
		}
	}
}

// routerBed makes a router's namespace (role) with a bridge at 198.18.0.1
// and 2001:db8::1, and n directors' namespaces on it, director i (from 1)
// at 198.18.0.1i and 2001:db8::1i on its eth0.
func routerBed(t *testing.T, ctx context.Context, role string, n int) (string, []string) {
	t.Helper()
	rns := bgpNetns(t, role)
	netnsSh(t, ctx, fmt.Sprintf(`set -e
ip -n %[1]s link set lo up
ip -n %[1]s link add br0 type bridge
ip -n %[1]s addr add 198.18.0.1/24 dev br0
ip -n %[1]s addr add 2001:db8::1/64 dev br0 nodad
ip -n %[1]s link set br0 up`, rns))
	dns := make([]string, n)
	for i := range n {
		dns[i] = bgpNetns(t, fmt.Sprintf("d%d", i+1))
		netnsSh(t, ctx, fmt.Sprintf(`set -e
ip link add d%[3]d netns %[1]s type veth peer name eth0 netns %[2]s
ip -n %[1]s link set d%[3]d master br0 up
ip -n %[2]s link set lo up
ip -n %[2]s addr add 198.18.0.1%[3]d/24 dev eth0
ip -n %[2]s addr add 2001:db8::1%[3]d/64 dev eth0 nodad
ip -n %[2]s link set eth0 up`, rns, dns[i], i+1))
	}
	return rns, dns
}

// birdConf is BIRD's configuration: a passive eBGP session with BFD per
// director and family, every route imported, none exported to the
// directors, and the kernel tables fed with merged (ECMP) paths.
func birdConf(dir string, directors int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `router id 198.18.0.1;
log "%s/bird.log" all;
protocol device { scan time 2; }
protocol kernel k4 { ipv4 { export all; }; merge paths on; }
protocol kernel k6 { ipv6 { export all; }; merge paths on; }
protocol bfd { interface "br0" { min rx interval 300 ms; min tx interval 300 ms; multiplier 5; }; }
template bgp director { local as 65000; passive on; bfd on; hold time 9; error wait time 1, 5; }
`, dir)
	for i := 1; i <= directors; i++ {
		fmt.Fprintf(&b, "protocol bgp d%dv4 from director { neighbor 198.18.0.1%d as 65001; ipv4 { import all; export none; }; }\n", i, i)
		fmt.Fprintf(&b, "protocol bgp d%dv6 from director { neighbor 2001:db8::1%d as 65001; ipv6 { import all; export none; }; }\n", i, i)
	}
	return b.String()
}

// birdRoute is one route of `birdc show route all`.
type birdRoute struct {
	proto, via, asPath, med, community string
}

var birdRouteHead = regexp.MustCompile(`unicast \[(\S+) `)

func parseBirdRoutes(out string) []birdRoute {
	var rs []birdRoute
	for _, line := range strings.Split(out, "\n") {
		if m := birdRouteHead.FindStringSubmatch(line); m != nil {
			rs = append(rs, birdRoute{proto: m[1]})
			continue
		}
		if len(rs) == 0 {
			continue
		}
		r := &rs[len(rs)-1]
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "via":
			r.via = f[1]
		case strings.HasPrefix(strings.TrimSpace(line), "BGP.as_path:"):
			r.asPath = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "BGP.as_path:"))
		case strings.HasPrefix(strings.TrimSpace(line), "BGP.med:"):
			r.med = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "BGP.med:"))
		case strings.HasPrefix(strings.TrimSpace(line), "BGP.community:"):
			r.community = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "BGP.community:"))
		}
	}
	return rs
}

// kernelNexthops is the next hops of the kernel's route to dst in ns
// (`ip route show`): the "nexthop via" lines of a multipath route, or the
// one "via" of a single path; none without a route.
func kernelNexthops(t *testing.T, ctx context.Context, ns, family, dst string) []string {
	t.Helper()
	out := netnsSh(t, ctx, fmt.Sprintf("ip netns exec %s ip %s route show %s", ns, family, dst))
	var hops []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "via" {
				hops = append(hops, f[i+1])
				break
			}
		}
	}
	slices.Sort(hops)
	return hops
}

func TestBGPECMPAtBIRD(t *testing.T) {
	needRouterTools(t, "bird2", "bird", "birdc")
	ctx, cancel := context.WithTimeout(t.Context(), 240*time.Second)
	defer cancel()
	const n = 3
	rns, dns := routerBed(t, ctx, "router", n)
	// BIRD in its namespace, in the foreground so the test owns it.
	dir := t.TempDir()
	conf, sock := filepath.Join(dir, "bird.conf"), filepath.Join(dir, "bird.ctl")
	if err := os.WriteFile(conf, []byte(birdConf(dir, n)), 0o600); err != nil {
		t.Fatal(err)
	}
	bird := exec.Command("ip", "netns", "exec", rns, "bird", "-f", "-c", conf, "-s", sock, "-P", filepath.Join(dir, "bird.pid"))
	birdOut := &syncOutput{}
	bird.Stdout, bird.Stderr = birdOut, birdOut
	if err := bird.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = bird.Process.Signal(syscall.SIGTERM)
		_ = bird.Wait()
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "bird.log"))
			t.Logf("bird said:\n%s\nbird.log:\n%s", birdOut, log)
		}
	})
	birdc := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, "birdc", append([]string{"-s", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("birdc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	waitFor(t, 10*time.Second, "BIRD answering on its socket", func() bool {
		return exec.Command("birdc", "-s", sock, "show", "status").Run() == nil
	})

	doc := writeDoc(t, `{"settings": {"network": "dr", "bgp": {"asn": 65001,
	    "peers": [{"address": "198.18.0.1", "asn": 65000, "hold_time": 9, "bfd": {"interval": 0.3, "multiplier": 5}},
	              {"address": "2001:db8::1", "asn": 65000, "hold_time": 9, "bfd": {"interval": 0.3, "multiplier": 5}}],
	    "communities": ["65000:100"], "med": 50, "drain": {"prepend": 3, "quiet": 1, "timeout": 20}}},
	  "services": [
	    {"name": "web4", "protocol": "tcp", "address": "198.18.100.1", "port": 80, "servers": [{"name": "r1", "address": "198.18.1.11"}, {"name": "r2", "address": "198.18.1.12"}]},
	    {"name": "web6", "protocol": "tcp", "address": "2001:db8:100::1", "port": 80, "servers": [{"name": "r1", "address": "2001:db8:1::11"}, {"name": "r2", "address": "2001:db8:1::12"}]}]}`)
	ds := make([]*serveProc, n)
	for i := range n {
		ds[i] = newServeProc(t, fmt.Sprintf("d%d", i+1))
		ds[i].netns = dns[i]
		ds[i].start()
		addr := fmt.Sprintf("198.18.0.1%d", i+1)
		ds[i].mustCLI("node", "set", "--router-id", addr, "--bgp-source", addr)
		ds[i].mustCLI("apply", "-f", doc)
	}

	protoState := func(out, proto string) string {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) >= 4 && f[0] == proto {
				return strings.Join(f[3:], " ")
			}
		}
		return ""
	}
	var protos []string
	for i := 1; i <= n; i++ {
		protos = append(protos, fmt.Sprintf("d%dv4", i), fmt.Sprintf("d%dv6", i))
	}
	start := time.Now()
	waitFor(t, 60*time.Second, "every BGP session Established at BIRD", func() bool {
		out := birdc("show", "protocols")
		for _, p := range protos {
			if !strings.Contains(protoState(out, p), "Established") {
				return false
			}
		}
		return true
	})
	t.Logf("%d sessions Established at BIRD %s after the directors started", len(protos), time.Since(start).Round(time.Millisecond))

	// BFD: one session per director and family, Up.
	bfdUp := func() []string {
		var up []string
		for _, line := range strings.Split(birdc("show", "bfd", "sessions"), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[2] == "Up" {
				up = append(up, f[0])
			}
		}
		slices.Sort(up)
		return up
	}
	wantBFD := []string{"198.18.0.11", "198.18.0.12", "198.18.0.13", "2001:db8::11", "2001:db8::12", "2001:db8::13"}
	waitFor(t, 30*time.Second, "BFD Up at BIRD for every director and family", func() bool { return slices.Equal(bfdUp(), wantBFD) })
	t.Logf("BFD Up at BIRD %s after the directors started:\n%s", time.Since(start).Round(time.Millisecond), birdc("show", "bfd", "sessions"))
	// The directors see the same from their side: both sessions up with
	// BFD up, both VIPs announced.
	for _, d := range ds {
		waitFor(t, 20*time.Second, d.name+"'s status showing both sessions and BFD up", func() bool {
			b := d.status().BGP
			if b == nil || len(b.Peers) != 2 || b.Announced != 2 {
				return false
			}
			for _, p := range b.Peers {
				if !p.Up || p.BFD != "up" {
					return false
				}
			}
			return true
		})
	}

	type vip struct{ prefix, family, addr, nh string }
	vips := []vip{{"198.18.100.1/32", "-4", "198.18.100.1", "198.18.0.1%d"}, {"2001:db8:100::1/128", "-6", "2001:db8:100::1", "2001:db8::1%d"}}
	routes := func(v vip) []birdRoute { return parseBirdRoutes(birdc("show", "route", "all", v.prefix)) }
	wantHops := func(v vip, ids ...int) []string {
		var h []string
		for _, id := range ids {
			h = append(h, fmt.Sprintf(v.nh, id))
		}
		return h
	}
	for _, v := range vips {
		waitFor(t, 30*time.Second, v.prefix+" received from every director", func() bool { return len(routes(v)) == n })
		rs := routes(v)
		for i, r := range rs {
			if r.community != "(65000,100)" || r.med != "50" || r.asPath != "65001" {
				t.Errorf("%s route %d at BIRD: %+v, want community (65000,100), MED 50, AS path 65001", v.prefix, i, r)
			}
		}
		var vias []string
		for _, r := range rs {
			vias = append(vias, r.via)
		}
		slices.Sort(vias)
		if want := wantHops(v, 1, 2, 3); !slices.Equal(vias, want) {
			t.Errorf("%s at BIRD via %v, want %v", v.prefix, vias, want)
		}
		waitFor(t, 10*time.Second, v.prefix+" in BIRD's kernel table with every director as a next hop", func() bool {
			return slices.Equal(kernelNexthops(t, ctx, rns, v.family, v.addr), wantHops(v, 1, 2, 3))
		})
		t.Logf("kernel route in BIRD's namespace:\n%s", netnsSh(t, ctx, fmt.Sprintf("ip netns exec %s ip %s route show %s", rns, v.family, v.addr)))
	}

	// node drain on d1 (AS-path prepend): BIRD keeps d1's routes with the
	// longer path, and the kernel's ECMP route loses d1's next hop.
	out := ds[0].mustCLI("node", "drain")
	if !strings.Contains(out, "drained (AS prepended 3 times)") {
		t.Errorf("node drain on d1:\n%s", out)
	}
	for _, v := range vips {
		waitFor(t, 20*time.Second, v.prefix+" from d1 prepended at BIRD", func() bool {
			for _, r := range routes(v) {
				if strings.HasPrefix(r.proto, "d1") {
					return r.asPath == "65001 65001 65001 65001"
				}
			}
			return false
		})
		waitFor(t, 20*time.Second, v.prefix+" in the kernel without d1's next hop", func() bool {
			return slices.Equal(kernelNexthops(t, ctx, rns, v.family, v.addr), wantHops(v, 2, 3))
		})
	}
	t.Logf("drained d1, BIRD's routes:\n%s", birdc("show", "route", "all", vips[0].prefix))
	ds[0].mustCLI("node", "undrain")
	for _, v := range vips {
		waitFor(t, 20*time.Second, v.prefix+" with d1's next hop again after undrain", func() bool {
			return slices.Equal(kernelNexthops(t, ctx, rns, v.family, v.addr), wantHops(v, 1, 2, 3))
		})
	}

	// SIGTERM on d2: its routes are withdrawn while its sessions are still
	// up (the withdrawal, then BGPWithdrawWait, then the sessions close).
	_ = ds[1].cmd.Process.Signal(syscall.SIGTERM)
	stopped := make(chan struct{})
	go func() { _ = ds[1].cmd.Wait(); close(stopped) }()
	withdrawnUp := map[string]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for len(withdrawnUp) < len(vips) && time.Now().Before(deadline) {
		st := birdc("show", "protocols")
		for _, v := range vips {
			proto := "d2v4"
			if v.family == "-6" {
				proto = "d2v6"
			}
			if _, seen := withdrawnUp[v.prefix]; seen {
				continue
			}
			if !slices.ContainsFunc(routes(v), func(r birdRoute) bool { return r.proto == proto }) {
				withdrawnUp[v.prefix] = strings.Contains(protoState(st, proto), "Established")
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, v := range vips {
		up, gone := withdrawnUp[v.prefix]
		if !gone {
			t.Errorf("%s from d2 still at BIRD 20 s after SIGTERM", v.prefix)
		} else if !up {
			t.Errorf("%s from d2 left BIRD only with its session: not withdrawn before the session closed", v.prefix)
		}
		waitFor(t, 10*time.Second, v.prefix+" in the kernel without d2's next hop", func() bool {
			return slices.Equal(kernelNexthops(t, ctx, rns, v.family, v.addr), wantHops(v, 1, 3))
		})
	}
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Error("d2's serve did not exit within 20 s of SIGTERM")
		_ = ds[1].cmd.Process.Kill()
		<-stopped
	}
	ds[1].cmd = nil

	// BFD takes a frozen director's routes away before the hold timer
	// (9 s) could: SIGSTOP d3, whose TCP sessions stay open but whose BFD
	// and keepalives stop; SIGCONT, and it rejoins.
	_ = ds[2].cmd.Process.Signal(syscall.SIGSTOP)
	frozen := time.Now()
	continued := false
	cont := func() {
		if !continued {
			_ = ds[2].cmd.Process.Signal(syscall.SIGCONT)
			continued = true
		}
	}
	defer cont()
	for _, v := range vips {
		waitFor(t, 20*time.Second, v.prefix+" in the kernel without the frozen d3's next hop", func() bool {
			return slices.Equal(kernelNexthops(t, ctx, rns, v.family, v.addr), wantHops(v, 1))
		})
	}
	gone := time.Since(frozen)
	st := birdc("show", "protocols")
	t.Logf("d3 frozen: its routes left BIRD's kernel table in %s (BFD 300 ms x 5, hold 9 s); d3v4: %s; d3v6: %s", gone.Round(time.Millisecond), protoState(st, "d3v4"), protoState(st, "d3v6"))
	for _, p := range []string{"d3v4", "d3v6"} {
		if !strings.Contains(protoState(st, p), "BFD session down") {
			t.Errorf("%s at BIRD: %q, want the session taken down by BFD", p, protoState(st, p))
		}
	}
	if gone >= 9*time.Second {
		t.Errorf("the frozen director's routes went after %s: the hold timer's doing, not BFD's", gone)
	}
	// Resumed, d3 rejoins. BIRD runs BFD only while a session is up, so
	// GoBGP's BFD expired with d3's sessions down; the reset GoBGP queued
	// then would close each new session at once (bgp.Speaker.TendPeers).
	cont()
	resumed := time.Now()
	for _, v := range vips {
		waitFor(t, 60*time.Second, v.prefix+" with d3's next hop again after it resumed", func() bool {
			return slices.Equal(kernelNexthops(t, ctx, rns, v.family, v.addr), wantHops(v, 1, 3))
		})
	}
	t.Logf("d3 resumed: back in the ECMP routes in %s (BIRD's error wait 1-5 s)", time.Since(resumed).Round(time.Millisecond))
	waitFor(t, 20*time.Second, "BFD Up again for d3", func() bool { return len(bfdUp()) == 4 })
}
