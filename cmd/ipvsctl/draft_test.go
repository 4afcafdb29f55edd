package main

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// A draft staged in the panel is the core's: ipvsctl draft lists it, diffs
// it and applies it through the API, as its author (the token's user).
func TestDraftStagedInThePanelAppliedFromTheCLI(t *testing.T) {
	g := servertest.Start(t)
	ctx := context.Background()
	if _, err := g.Core.Apply(ctx, server.Actor{Name: "seed", Via: "cli"}, strings.NewReader(drainDoc), "seed", server.WriteOptions{NoWait: true}); err != nil {
		t.Fatal(err)
	}
	admin := g.PanelLogin(t, "admin")
	if resp, body := g.Panel(t, admin, "POST", "/services/web/servers/r2", url.Values{"stage": {"1"}, "name": {"r2"}, "address": {"198.18.0.12"},
		"weight": {"9"}, "enabled": {"1"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("stage: %s %s", resp.Status, body)
	}
	cli := func(args ...string) (string, int) {
		var out, errb bytes.Buffer
		env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string {
			return map[string]string{"USER": "carol", "IPVSCTL_SERVER": g.URL, "IPVSCTL_TOKEN": g.Tokens[auth.Admin]}[k]
		}}
		code := dispatch(env, args)
		return out.String() + errb.String(), code
	}
	if out, code := cli("draft", "list"); code != 0 || !strings.Contains(out, "admin") {
		t.Fatalf("draft list: %d %s", code, out)
	}
	if out, code := cli("draft", "diff"); code != 0 || !strings.Contains(out, "weight: 1 -> 9") || !strings.Contains(out, "-w 9") {
		t.Fatalf("draft diff: %d %s", code, out)
	}
	st, _, _ := g.Core.State(ctx)
	if w := st.Services[0].Servers[1].EffectiveWeight(); w != 1 {
		t.Fatalf("staged only, yet the weight is %d", w)
	}
	if out, code := cli("draft", "apply"); code != 0 || !strings.Contains(out, "stored revision") {
		t.Fatalf("draft apply: %d %s", code, out)
	}
	st, _, _ = g.Core.State(ctx)
	if w := st.Services[0].Servers[1].EffectiveWeight(); w != 9 {
		t.Fatalf("after draft apply the weight is %d", w)
	}
	if out, code := cli("draft", "diff"); code == 0 || !strings.Contains(out, "no draft") {
		t.Fatalf("the applied draft is still there: %d %s", code, out)
	}
	if out, code := cli("audit", "--action", "draft apply"); code != 0 || !strings.Contains(out, "draft apply") || !strings.Contains(out, "admin") {
		t.Fatalf("audit: %d %s", code, out)
	}
}
