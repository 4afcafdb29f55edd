package main

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp/bgptest"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// node drain through the daemon, against a real GoBGP router: it prints
// the drain's progress while connections still reach the VIP, reports
// drained once they stop (the router sees the AS prepended), and times out
// with exit 1 while they keep coming; node show and status show it.
func TestNodeDrainWaitsUntilFlowsStop(t *testing.T) {
	r := bgptest.StartRouter(t)
	g := servertest.Start(t)
	run := func(args ...string) cliRun {
		var out, errb bytes.Buffer
		env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string {
			return map[string]string{"USER": "bob", "IPVSCTL_DB": g.DB}[k]
		}}
		code := dispatch(env, args)
		return cliRun{code, out.String(), errb.String()}
	}
	doc := func(timeout float64) string {
		return fmt.Sprintf(`{"settings": {"network": "dr", "bgp": {"asn": 65001, "peers": [{"address": "127.0.0.2", "port": %d, "asn": 65000, "hold_time": 9}],
		  "drain": {"prepend": 2, "quiet": 1.5, "timeout": %v}}},
		  "services": [{"name": "web", "protocol": "tcp", "address": "198.18.0.100", "port": 80, "servers": [{"name": "r1", "address": "198.18.1.11"}]}]}`, r.Port, timeout)
	}
	if c := run("node", "set", "--router-id", "198.18.0.1", "--bgp-source", "127.0.0.1"); c.code != 0 {
		t.Fatalf("node set: %+v", c)
	}
	if c := run("apply", "-f", writeDoc(t, doc(20))); c.code != 0 {
		t.Fatalf("apply: %+v", c)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s := g.Core.BGPStatus(); s != nil && s.Announced == 1 && len(s.Peers) == 1 && s.Peers[0].Up {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never announced: %+v", g.Core.BGPStatus())
		}
		time.Sleep(50 * time.Millisecond)
	}
	key := ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv4, Protocol: ipvsmgr.ProtoTCP, Addr: netip.MustParseAddr("198.18.0.100"), Port: 80}
	// traffic: 10 connections every 100 ms for d (bounded), as the
	// router's ECMP would keep sending until it prefers another path.
	traffic := func(ctx context.Context, d time.Duration) *sync.WaitGroup {
		var wg sync.WaitGroup
		wg.Go(func() {
			end := time.Now().Add(d)
			for time.Now().Before(end) && ctx.Err() == nil {
				g.Kernel.AddConns(key, 10)
				time.Sleep(100 * time.Millisecond)
			}
		})
		return &wg
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg := traffic(ctx, 2*time.Second)
	c := run("node", "drain")
	wg.Wait()
	t.Logf("node drain:\n%s", c.stdout)
	if c.code != 0 || !strings.Contains(c.stdout, "draining (AS prepended 2 times)") || !strings.Contains(c.stdout, "drained (AS prepended 2 times): no new connection for 1.5 s") {
		t.Fatalf("node drain: %+v", c)
	}
	if p, _ := r.ASPath(t, "198.18.0.100/32"); fmt.Sprint(p) != "[65001 65001 65001]" {
		t.Errorf("AS path at the router after the drain: %v", p)
	}
	if c := run("node", "show"); !strings.Contains(c.stdout, "drain:       drained") ||
		!strings.Contains(c.stdout, "198.18.0.100/32 announced, AS prepended 2 times: de-preferred by node drain") ||
		!strings.Contains(c.stdout, "maglev web (-t 198.18.0.100:80): ") {
		t.Errorf("node show:\n%s", c.stdout)
	}
	if c := run("status"); !strings.Contains(c.stdout, "BGP: 1 of 1 sessions up, 1 of 1 VIPs announced, drained") {
		t.Errorf("status:\n%s", c.stdout)
	}
	if c := run("node", "undrain"); c.code != 0 || !strings.Contains(c.stdout, "drained:     false") {
		t.Fatalf("node undrain: %+v", c)
	}
	deadline = time.Now().Add(20 * time.Second)
	for p, _ := r.ASPath(t, "198.18.0.100/32"); fmt.Sprint(p) != "[65001]"; p, _ = r.ASPath(t, "198.18.0.100/32") {
		if time.Now().After(deadline) {
			t.Fatalf("AS path after undrain: %v", p)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Flows that never stop: the drain times out, exit 1, saying why.
	if c := run("apply", "-f", writeDoc(t, doc(3))); c.code != 0 {
		t.Fatalf("apply: %+v", c)
	}
	wg = traffic(ctx, 8*time.Second)
	c = run("node", "drain")
	cancel()
	wg.Wait()
	if c.code != exitFail || !strings.Contains(c.stdout, "timed_out (AS prepended 2 times): after 3 s new connections still arrive") ||
		!strings.Contains(c.stdout, "settings.bgp.drain.mode withdraw") {
		t.Errorf("node drain under steady traffic: %+v", c)
	}
	if s := g.Core.BGPStatus(); s.Drain == nil || s.Drain.Phase != "timed_out" || s.Drain.NewConns == 0 {
		t.Errorf("status after the timeout: %+v", s.Drain)
	}
}
