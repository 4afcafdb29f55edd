package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
	"github.com/ipvsctl/ipvsctl/server/store"
)

const drainDoc = `{"services":[{"name":"web","address":"198.18.0.100","port":80,"scheduler":"wrr",
 "servers":[{"name":"r1","address":"198.18.0.11","weight":3},{"name":"r2","address":"198.18.0.12","weight":1}]}]}`

// A drain is one thing whichever way it is made: drained in the panel and
// enabled from the CLI, or drained through the API and enabled in the
// panel, a real server gets its configured weight back (it was kept in
// the document while the kernel had it at 0), and `ipvsctl audit --action
// "rs drain"` lists the drains made from the CLI, the API and the panel.
func TestDrainEnableAcrossEntryPoints(t *testing.T) {
	g := servertest.Start(t)
	ctx := context.Background()
	if _, err := g.Core.Apply(ctx, server.Actor{Name: "seed", Via: "cli"}, strings.NewReader(drainDoc), "seed", server.WriteOptions{NoWait: true}); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, int) {
		var out, errb bytes.Buffer
		env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string {
			// the local daemon's socket beside the database, as root's ipvsctl on the director
			return map[string]string{"USER": "carol", "IPVSCTL_DB": g.DB}[k]
		}}
		code := dispatch(env, args)
		return out.String() + errb.String(), code
	}
	server1 := func() *ipvsmgr.Server {
		st, _, err := g.Core.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return &st.Services[0].Servers[0]
	}
	kernelWeight := func() uint32 {
		tb, err := g.Kernel.Table(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, vs := range tb.Services {
			for _, d := range vs.Dests {
				if d.Key.Addr.String() == "198.18.0.11" {
					return d.Weight
				}
			}
		}
		t.Fatal("r1 is not in the kernel")
		return 0
	}
	want := server1().EffectiveWeight()
	if want != 3 || kernelWeight() != 3 {
		t.Fatalf("seeded weight %d, kernel %d", want, kernelWeight())
	}
	operator := g.PanelLogin(t, "operator")

	// Drained in the panel: weight 0 in the kernel, 3 kept in the document.
	if resp, body := g.Panel(t, operator, "POST", "/services/web/servers/r1/drain", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("panel drain: %s %s", resp.Status, body)
	}
	if rs := server1(); !rs.Drained || rs.EffectiveWeight() != want || kernelWeight() != 0 {
		t.Fatalf("after the panel's drain: drained %v weight %d, kernel %d", rs.Drained, rs.EffectiveWeight(), kernelWeight())
	}
	// Enabled from the CLI: the configured weight is back.
	if out, code := cli("rs", "enable", "web", "r1"); code != 0 {
		t.Fatalf("ipvsctl rs enable: %d %s", code, out)
	}
	if rs := server1(); rs.Drained || rs.EffectiveWeight() != want || kernelWeight() != uint32(want) {
		t.Fatalf("after the CLI's enable: drained %v weight %d, kernel %d", rs.Drained, rs.EffectiveWeight(), kernelWeight())
	}

	// Drained through the API, enabled in the panel.
	if resp, body := g.API(t, auth.Operator, "POST", "/api/v1/services/web/servers/r1/drain", ""); resp.StatusCode != 200 {
		t.Fatalf("API drain: %s %s", resp.Status, body)
	}
	if rs := server1(); !rs.Drained || kernelWeight() != 0 {
		t.Fatalf("after the API's drain: drained %v, kernel %d", rs.Drained, kernelWeight())
	}
	if resp, body := g.Panel(t, operator, "POST", "/services/web/servers/r1/enable", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("panel enable: %s %s", resp.Status, body)
	}
	if rs := server1(); rs.Drained || rs.EffectiveWeight() != want || kernelWeight() != uint32(want) {
		t.Fatalf("after the panel's enable: drained %v weight %d, kernel %d", rs.Drained, rs.EffectiveWeight(), kernelWeight())
	}

	// And one from the CLI; the audit lists the three under one action.
	if out, code := cli("rs", "drain", "web", "r1"); code != 0 {
		t.Fatalf("ipvsctl rs drain: %d %s", code, out)
	}
	out, code := cli("audit", "--action", "rs drain", "--json")
	if code != 0 {
		t.Fatalf("ipvsctl audit: %d %s", code, out)
	}
	var entries []store.AuditEntry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	via := map[string]int{}
	for _, e := range entries {
		if e.Action != "rs drain" || e.Target != "web r1" || e.Outcome != store.OutcomeSuccess {
			t.Errorf("audit entry %+v", e)
		}
		via[e.Via]++
	}
	if via["panel"] != 1 || via["api"] != 1 || via["cli"] != 1 || len(entries) != 3 {
		t.Fatalf("drains in the audit by interface: %v (%d entries)", via, len(entries))
	}
}
