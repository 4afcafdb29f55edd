package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
	"github.com/ipvsctl/ipvsctl/server/store"
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

// draftRig is where the --draft tests run their CLI: its calls, the stored
// state and revision, the kernel's weight of a real server.
type draftRig struct {
	cli    func(args ...string) (string, int)
	stored func() (*ipvsmgr.State, int64)
	weight func(addr string) (uint32, bool)
	author string
}

// The verbs stage with --draft: two edits staged, neither the stored state
// nor the kernel moves, draft diff shows both, draft apply stores them as
// one revision; a bad edit staged gets the direct verb's error. The same
// through a core in this process, the local daemon's socket, and the API
// over TCP with a token.
func TestVerbsStageWithDraft(t *testing.T) {
	ctx := context.Background()
	kernelWeight := func(t *testing.T, k *fakekernel.Kernel) func(string) (uint32, bool) {
		return func(addr string) (uint32, bool) {
			tb, err := k.Table(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, vs := range tb.Services {
				for _, d := range vs.Dests {
					if d.Key.Addr.String() == addr {
						return d.Weight, true
					}
				}
			}
			return 0, false
		}
	}
	daemon := func(t *testing.T, vars func(g *servertest.Rig) map[string]string, author string) draftRig {
		g := servertest.Start(t)
		if _, err := g.Core.Apply(ctx, server.Actor{Name: "seed", Via: "cli"}, strings.NewReader(drainDoc), "seed", server.WriteOptions{NoWait: true}); err != nil {
			t.Fatal(err)
		}
		env := vars(g)
		return draftRig{
			cli: func(args ...string) (string, int) {
				var out, errb bytes.Buffer
				code := dispatch(&cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string { return env[k] }}, args)
				return out.String() + errb.String(), code
			},
			stored: func() (*ipvsmgr.State, int64) {
				st, rev, err := g.Core.State(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return st, rev
			},
			weight: kernelWeight(t, g.Kernel),
			author: author,
		}
	}
	rigs := map[string]func(t *testing.T) draftRig{
		"local core": func(t *testing.T) draftRig {
			k := fakekernel.New()
			dir := t.TempDir()
			db, doc := filepath.Join(dir, "ipvsctl.db"), filepath.Join(dir, "state.json")
			if err := os.WriteFile(doc, []byte(drainDoc), 0o600); err != nil {
				t.Fatal(err)
			}
			r := draftRig{
				cli: func(args ...string) (string, int) {
					var out, errb bytes.Buffer
					env := &cliEnv{stdout: &out, stderr: &errb, kernel: k, getenv: func(k string) string {
						return map[string]string{"USER": "carol", "IPVSCTL_DB": db}[k]
					}}
					code := dispatch(env, args)
					return out.String() + errb.String(), code
				},
				stored: func() (*ipvsmgr.State, int64) {
					s, err := store.Open(ctx, db)
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					st, rev, err := s.Current(ctx)
					if err != nil {
						t.Fatal(err)
					}
					return st, rev
				},
				weight: kernelWeight(t, k),
				author: "carol",
			}
			if out, code := r.cli("apply", "-f", doc, "--no-wait"); code != 0 {
				t.Fatalf("seed: %d %s", code, out)
			}
			return r
		},
		"local daemon socket": func(t *testing.T) draftRig {
			return daemon(t, func(g *servertest.Rig) map[string]string {
				return map[string]string{"USER": "carol", "IPVSCTL_DB": g.DB}
			}, "carol")
		},
		"API with a token": func(t *testing.T) draftRig {
			return daemon(t, func(g *servertest.Rig) map[string]string {
				return map[string]string{"USER": "carol", "IPVSCTL_SERVER": g.URL, "IPVSCTL_TOKEN": g.Tokens[auth.Admin]}
			}, "admin")
		},
	}
	for name, start := range rigs {
		t.Run(name, func(t *testing.T) {
			r := start(t)
			_, base := r.stored()
			if w, ok := r.weight("198.18.0.11"); !ok || w != 3 {
				t.Fatalf("seeded kernel weight of r1: %d %v", w, ok)
			}
			for _, args := range [][]string{{"rs", "drain", "web", "r1", "--draft"}, {"rs", "set", "web", "r2", "--weight", "9", "--draft"}} {
				out, code := r.cli(args...)
				if code != 0 || !strings.Contains(out, "staged in the draft of "+r.author) {
					t.Fatalf("%v: %d %s", args, code, out)
				}
			}
			st, rev := r.stored()
			if rev != base || st.Services[0].Servers[0].Drained || st.Services[0].Servers[1].EffectiveWeight() != 1 {
				t.Fatalf("staged only, yet the stored state moved: revision %d (was %d), %+v", rev, base, st.Services[0].Servers)
			}
			if w, _ := r.weight("198.18.0.11"); w != 3 {
				t.Fatalf("staged only, yet the kernel has r1 at weight %d", w)
			}
			if w, _ := r.weight("198.18.0.12"); w != 1 {
				t.Fatalf("staged only, yet the kernel has r2 at weight %d", w)
			}
			out, code := r.cli("draft", "diff")
			if code != 0 || !strings.Contains(out, "draft of "+r.author) || !strings.Contains(out, "weight: 1 -> 9") ||
				!strings.Contains(out, "drained") || !strings.Contains(out, "-w 9") || !strings.Contains(out, "-w 0") {
				t.Fatalf("draft diff: %d %s", code, out)
			}

			// A bad edit: the same error staged as made directly, and the draft kept.
			direct, dcode := r.cli("rs", "set", "web", "r2", "--weight", "70000")
			staged, scode := r.cli("rs", "set", "web", "r2", "--weight", "70000", "--draft")
			if dcode == 0 || scode != dcode || staged != direct || !strings.Contains(staged, "services[0].servers[1].weight: 70000 is out of range") {
				t.Fatalf("bad weight: direct %d %q, staged %d %q", dcode, direct, scode, staged)
			}
			direct, dcode = r.cli("vs", "set", "nosuch", "--scheduler", "rr")
			staged, scode = r.cli("vs", "set", "nosuch", "--scheduler", "rr", "--draft")
			if dcode == 0 || scode != dcode || staged != direct || !strings.Contains(staged, `"nosuch"`) {
				t.Fatalf("unknown service: direct %d %q, staged %d %q", dcode, direct, scode, staged)
			}
			if out, code := r.cli("draft", "diff"); code != 0 || !strings.Contains(out, "weight: 1 -> 9") || strings.Contains(out, "70000") {
				t.Fatalf("draft diff after the refused edits: %d %s", code, out)
			}

			if out, code := r.cli("draft", "apply", "--no-wait"); code != 0 || !strings.Contains(out, fmt.Sprintf("stored revision %d", base+1)) {
				t.Fatalf("draft apply: %d %s", code, out)
			}
			st, rev = r.stored()
			if rev != base+1 || !st.Services[0].Servers[0].Drained || st.Services[0].Servers[1].EffectiveWeight() != 9 {
				t.Fatalf("after draft apply: revision %d (was %d), %+v", rev, base, st.Services[0].Servers)
			}
			if w, _ := r.weight("198.18.0.11"); w != 0 {
				t.Fatalf("after draft apply the kernel has r1 at weight %d, want 0 (drained)", w)
			}
			if w, _ := r.weight("198.18.0.12"); w != 9 {
				t.Fatalf("after draft apply the kernel has r2 at weight %d", w)
			}
			if out, code := r.cli("draft", "diff"); code == 0 || !strings.Contains(out, "no draft") {
				t.Fatalf("the applied draft is still there: %d %s", code, out)
			}
		})
	}
}

// ipvsctl draft start starts the caller's draft through the API (the
// panel's "Start a draft"), keeps it when there is one, and the verbs'
// --draft stage in it.
func TestDraftStartFromTheCLI(t *testing.T) {
	g := servertest.Start(t)
	ctx := context.Background()
	if _, err := g.Core.Apply(ctx, server.Actor{Name: "seed", Via: "cli"}, strings.NewReader(drainDoc), "seed", server.WriteOptions{NoWait: true}); err != nil {
		t.Fatal(err)
	}
	cli := func(role auth.Role, args ...string) (string, int) {
		var out, errb bytes.Buffer
		env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string {
			return map[string]string{"IPVSCTL_SERVER": g.URL, "IPVSCTL_TOKEN": g.Tokens[role]}[k]
		}}
		code := dispatch(env, args)
		return out.String() + errb.String(), code
	}
	if out, code := cli(auth.Operator, "draft", "start"); code == 0 || !strings.Contains(out, "needs the admin role") {
		t.Fatalf("operator draft start: %d %s", code, out)
	}
	if out, code := cli(auth.Admin, "draft", "start"); code != 0 || !strings.Contains(out, "draft of admin, made on revision 1") {
		t.Fatalf("draft start: %d %s", code, out)
	}
	if out, code := cli(auth.Admin, "vs", "set", "web", "--scheduler", "rr", "--draft"); code != 0 || !strings.Contains(out, "staged in the draft of admin") {
		t.Fatalf("vs set --draft: %d %s", code, out)
	}
	if out, code := cli(auth.Admin, "settings", "set", "--retire-timeout", "60", "--draft"); code != 0 || !strings.Contains(out, "staged in the draft of admin") {
		t.Fatalf("settings set --draft: %d %s", code, out)
	}
	// Started again: the staged edits are kept.
	if out, code := cli(auth.Admin, "draft", "start", "--json"); code != 0 || !strings.Contains(out, `"author": "admin"`) {
		t.Fatalf("draft start --json: %d %s", code, out)
	}
	if out, code := cli(auth.Admin, "draft", "diff"); code != 0 || !strings.Contains(out, `scheduler: "wrr" -> "rr"`) || !strings.Contains(out, "retire_timeout") {
		t.Fatalf("draft diff: %d %s", code, out)
	}
	if st, rev, _ := g.Core.State(ctx); rev != 1 || st.Services[0].Scheduler != "wrr" || st.Settings.RetireTimeout != 0 {
		t.Fatalf("staged only, yet revision %d scheduler %q drain timeout %d", rev, st.Services[0].Scheduler, st.Settings.RetireTimeout)
	}
}

// ipvsctl --server ... draft start, after the panel drew pages for the same
// user, and through the daemon's socket with no --server: the panel's next
// edit is staged in the draft the CLI started, not made live.
func TestDraftStartedFromTheCLIStagesPanelEdits(t *testing.T) {
	for _, via := range []string{"--server", "socket"} {
		t.Run(via, func(t *testing.T) {
			g := servertest.Start(t)
			ctx := context.Background()
			if _, err := g.Core.Apply(ctx, server.Actor{Name: "seed", Via: "cli"}, strings.NewReader(drainDoc), "seed", server.WriteOptions{NoWait: true}); err != nil {
				t.Fatal(err)
			}
			vars := map[string]string{"IPVSCTL_SERVER": g.URL, "IPVSCTL_TOKEN": g.Tokens[auth.Admin]}
			if via == "socket" {
				// The local CLI's user, as the daemon's socket names it, is the panel's admin.
				vars = map[string]string{"IPVSCTL_DB": g.DB, "USER": "admin", "SUDO_USER": "admin"}
			}
			admin := g.PanelLogin(t, "admin")
			for _, path := range []string{"/", "/services/web"} {
				if resp, _ := g.Panel(t, admin, "GET", path, nil); resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %s", path, resp.Status)
				}
			}
			var out, errb bytes.Buffer
			env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }}
			if code := dispatch(env, []string{"draft", "start"}); code != 0 || !strings.Contains(errb.String(), "draft of admin, made on revision 1") {
				t.Fatalf("draft start: %d %s%s", code, out.String(), errb.String())
			}
			g.Kernel.Ops()
			if resp, body := g.Panel(t, admin, "POST", "/services/web/servers/r2", url.Values{"name": {"r2"}, "address": {"198.18.0.12"},
				"weight": {"9"}, "enabled": {"1"}, "base": {"1"}}); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("panel edit: %s %s", resp.Status, body)
			}
			if st, rev, _ := g.Core.State(ctx); rev != 1 || st.Services[0].Servers[1].EffectiveWeight() != 1 {
				t.Fatalf("the panel's edit went live: revision %d, r2's weight %d", rev, st.Services[0].Servers[1].EffectiveWeight())
			}
			if ops := g.Kernel.Ops(); len(ops) != 0 {
				t.Fatalf("staged only, yet the kernel got %q", ops)
			}
			diff, err := g.Core.DiffDraft(ctx, "admin")
			if err != nil || !strings.Contains(strings.Join(diff.Changes, "\n"), "weight: 1 -> 9") {
				t.Fatalf("the CLI's draft lacks the panel's edit: %+v %v", diff, err)
			}
		})
	}
}
