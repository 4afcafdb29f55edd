//go:build vmtest

package vmtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// frrPath is one path FRR holds for the VIP (show bgp ipv4 unicast VIP/32 json).
type frrPath struct {
	ASPath struct {
		String string `json:"string"`
	} `json:"aspath"`
	Multipath bool `json:"multipath"`
	Bestpath  *struct {
		Overall bool `json:"overall"`
	} `json:"bestpath"`
	Peer struct {
		PeerID string `json:"peerId"`
	} `json:"peer"`
}

// paths are FRR's BGP paths for the VIP, by the director they came from.
func (e *ecmp) paths() (map[string]frrPath, string) {
	out := e.vtysh("show bgp ipv4 unicast " + vip + "/32 json")
	var r struct {
		Paths []frrPath `json:"paths"`
	}
	json.Unmarshal([]byte(out), &r)
	m := map[string]frrPath{}
	for _, p := range r.Paths {
		m[p.Peer.PeerID] = p
	}
	return m, out
}

func bgpDrainDoc(mode string) string {
	return strings.Replace(bgpDoc(), `"communities": ["65000:100"],`,
		`"communities": ["65000:100"], "drain": {"mode": "`+mode+`", "quiet": 6, "timeout": 120},`, 1)
}

// TestBGPDrainPrependAtFRR: node drain de-prefers a director at a real FRR
// router: FRR keeps its path with the AS prepended three times but takes
// its nexthop out of the ECMP route; new connections keep being answered
// (by the others) while node drain waits, and it reports drained once the
// director's own IPVS counter has stopped growing; undrain gives the plain
// path and the nexthop back; in withdraw mode FRR loses the path. The three
// directors' real kernels give every service the same Maglev fingerprint.
func TestBGPDrainPrependAtFRR(t *testing.T) {
	e := newECMP(t, ecmpOpts{})
	for i, d := range e.dirs {
		d.apply(bgpDrainDoc("prepend"))
		d.cmdOut("node", "set", "--router-id", bgpDirectors[i], "--bgp-source", bgpDirectors[i])
		dd := &director{l: d, addr: bgpDirectors[i]}
		t.Cleanup(func() {
			dd.stop(syscall.SIGTERM)
			if t.Failed() {
				t.Logf("%s daemon logs:\n%s", d.dir, strings.Join(dd.all, "\n--- restarted ---\n"))
			}
		})
		dd.start()
		e.ds = append(e.ds, dd)
	}
	waitFor(t, "three ECMP nexthops for the VIP at the router", 90*time.Second, func() bool { return len(e.nexthops()) == 3 })

	// The same Maglev inputs on three real kernels. The kernel puts each
	// destination it adds at the head of the service's list (list_add_rcu in
	// ip_vs_ctl.c), which mh walks from the head: canonical order read back
	// is newest first.
	var prints []string
	for _, d := range e.dirs {
		var v struct {
			BGP struct {
				Fingerprints []struct{ Service, Fingerprint, Inputs string } `json:"fingerprints"`
			} `json:"bgp"`
		}
		waitFor(t, d.dir+"'s fingerprints", 20*time.Second, func() bool {
			out, err := d.ipvsctl("node", "show", "--json")
			return err == nil && json.Unmarshal([]byte(out), &v) == nil && len(v.BGP.Fingerprints) == 2
		})
		prints = append(prints, fmt.Sprint(v.BGP.Fingerprints))
	}
	t.Logf("fingerprints: %s", prints[0])
	if prints[0] != prints[1] || prints[0] != prints[2] || !strings.Contains(prints[0], "mh mh-port "+labNet+".13:80/1 "+labNet+".12:80/1 "+labNet+".11:80/1") {
		t.Errorf("the directors' Maglev inputs differ or are not canonical:\n%s", strings.Join(prints, "\n"))
	}

	// Drain the second director while a client keeps opening connections
	// (bounded: at most 600, 90 s). The client starts once the drain shows
	// in the status: the drain counts from the daemon's last reading of the
	// kernel's counters before it began, so a connection made before that
	// would be in ipvsadm's difference and not in the drain's.
	drained := e.dirs[1]
	type result struct {
		out string
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	connsBefore := e.serviceConns(drained) // ipvsadm's count, to check the drain's own against
	started := time.Now()
	go func() {
		out, err := drained.ipvsctl("node", "drain")
		done <- result{out, err, time.Now()}
	}()
	var nv struct {
		BGP struct {
			Drain *struct {
				Phase    string `json:"phase"`
				NewConns int    `json:"new_conns"`
			} `json:"drain"`
		} `json:"bgp"`
	}
	waitFor(t, "the drain in the drained director's status", 30*time.Second, func() bool {
		out, err := drained.ipvsctl("node", "show", "--json")
		return err == nil && json.Unmarshal([]byte(out), &nv) == nil && nv.BGP.Drain != nil
	})
	// Each connection's client address and when it was dialed, to tell from
	// the drained director's connection table (ipvsadm -Lnc, exact, where
	// the service counter lags by up to the kernel's 2 s estimator period)
	// whether one reached it after its nexthop left the router's route.
	type dialed struct {
		from string
		at   time.Time
	}
	var dials []dialed
	var res *result
	var hopsGone time.Time
	asked, failed := 0, 0
	for deadline := time.Now().Add(90 * time.Second); res == nil && asked < 600 && time.Now().Before(deadline); {
		select {
		case r := <-done:
			res = &r
			continue
		default:
		}
		if hopsGone.IsZero() {
			if hops := e.nexthops(); len(hops) == 2 && !slices.Contains(hops, bgpDirectors[1]) {
				hopsGone = time.Now()
			}
		}
		asked++
		at := time.Now()
		if c, err := e.base.dial(vip + ":80"); err != nil {
			failed++
		} else {
			dials = append(dials, dialed{c.LocalAddr().String(), at})
			if _, err := ask(c); err != nil {
				failed++
			}
			c.Close()
		}
		time.Sleep(100 * time.Millisecond)
	}
	if res == nil {
		t.Fatalf("node drain did not return within 90 s (%d connections asked)", asked)
	}
	t.Logf("node drain (prepend): nexthop out of the ECMP route %s after the drain was asked for; drained reported after %s; %d new connections during the drain, %d failed\n%s",
		hopsGone.Sub(started).Round(time.Millisecond), res.at.Sub(started).Round(time.Millisecond), asked, failed, res.out)
	if res.err != nil || !strings.Contains(res.out, "drained (AS prepended 3 times)") {
		t.Errorf("node drain: %v\n%s", res.err, res.out)
	}
	// The drain's count of new connections is the kernel's, as ipvsadm
	// reads it (the client reaches only VIP:80).
	if out, err := drained.ipvsctl("node", "show", "--json"); err != nil || json.Unmarshal([]byte(out), &nv) != nil || nv.BGP.Drain == nil {
		t.Fatalf("node show --json: %v\n%s", err, out)
	}
	carried := map[string]bool{}
	for _, line := range strings.Split(e.base.ns(drained.dir, "ipvsadm -Lnc"), "\n") {
		// "TCP 01:58  FIN_WAIT    198.19.1.2:45678  198.18.0.100:80  198.18.0.11:80"
		if f := strings.Fields(line); len(f) == 6 && f[0] == "TCP" && f[4] == vip+":80" {
			carried[f[3]] = true
		}
	}
	var late []string
	mine := 0
	for _, d := range dials {
		if carried[d.from] {
			mine++
			if !hopsGone.IsZero() && d.at.After(hopsGone) {
				late = append(late, fmt.Sprintf("%s dialed %s after", d.from, d.at.Sub(hopsGone).Round(time.Millisecond)))
			}
		}
	}
	t.Logf("the drained director's VIP:80 counter (ipvsadm): %d before the drain, %d at the end; node drain counted %d; its connection table holds %d of the %d dialed",
		connsBefore, e.serviceConns(drained), nv.BGP.Drain.NewConns, mine, len(dials))
	if got := e.serviceConns(drained) - connsBefore; got != nv.BGP.Drain.NewConns || got != mine {
		t.Errorf("node drain counted %d new connections, ipvsadm %d, the connection table %d", nv.BGP.Drain.NewConns, got, mine)
	}
	if hopsGone.IsZero() {
		t.Errorf("the drained director's nexthop stayed in the ECMP route: %v", e.nexthops())
	}
	if len(late) > 0 {
		t.Errorf("the drained director took connections dialed after its nexthop left the router's route: %s", strings.Join(late, "; "))
	}
	if failed > 0 {
		t.Errorf("%d of %d new connections failed during the drain", failed, asked)
	}
	paths, raw := e.paths()
	p, ok := paths[bgpDirectors[1]]
	if !ok || p.ASPath.String != "65001 65001 65001 65001" || p.Multipath || (p.Bestpath != nil && p.Bestpath.Overall) {
		t.Errorf("FRR's path from the drained director: %+v (want AS path 65001 x4, neither best nor multipath)\n%s", p, raw)
	}
	for _, a := range []string{bgpDirectors[0], bgpDirectors[2]} {
		if q := paths[a]; q.ASPath.String != "65001" {
			t.Errorf("FRR's path from %s: %+v, want the plain AS path", a, q)
		}
	}

	drained.cmdOut("node", "undrain")
	waitFor(t, "three nexthops and the plain path after undrain", 30*time.Second, func() bool {
		paths, _ := e.paths()
		return len(e.nexthops()) == 3 && paths[bgpDirectors[1]].ASPath.String == "65001"
	})

	// Withdraw mode: FRR loses the path.
	for _, d := range e.dirs {
		d.apply(bgpDrainDoc("withdraw"))
	}
	withdrawn := time.Now()
	go func() {
		out, err := drained.ipvsctl("node", "drain")
		done <- result{out, err, time.Now()}
	}()
	waitFor(t, "the drained director's path gone at FRR", 30*time.Second, func() bool { paths, _ := e.paths(); _, ok := paths[bgpDirectors[1]]; return !ok })
	t.Logf("node drain (withdraw): path gone at FRR after %s", time.Since(withdrawn).Round(time.Millisecond))
	select {
	case r := <-done:
		if r.err != nil || !strings.Contains(r.out, "drained (routes withdrawn)") {
			t.Errorf("node drain in withdraw mode: %v\n%s", r.err, r.out)
		}
	case <-time.After(60 * time.Second):
		t.Errorf("node drain in withdraw mode did not return within 60 s")
	}
	drained.cmdOut("node", "undrain")
	waitFor(t, "three nexthops after the last undrain", 30*time.Second, func() bool { return len(e.nexthops()) == 3 })
}
