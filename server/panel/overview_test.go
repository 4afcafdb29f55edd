package panel

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/daemon"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// newEnvStill is an env whose snapshot moves only when a reconcile makes a
// new one (the poll, the full reconcile and the sparklines' samples are an
// hour apart): a page that shows a change then shows it because its key
// has it, not because the snapshot moved under it every 50 ms.
func newEnvStill(t *testing.T, core ...func(*server.Config)) *env {
	return newEnvOf(t, envOptions{core: core, daemon: func(d *daemon.Daemon) { d.Snapshot, d.Interval = time.Hour, time.Hour },
		panel: func(p *Panel) { p.sampler.every = time.Hour }})
}

// tile is the text of one overview tile's <dd> after <dt>name</dt>.
func tile(t *testing.T, body, name string) string {
	t.Helper()
	m := regexp.MustCompile(`<dt>` + regexp.QuoteMeta(name) + `</dt><dd>(.*?)</dd>`).FindStringSubmatch(strings.ReplaceAll(body, "\n", " "))
	if m == nil {
		t.Fatalf("no %q in the overview: %s", name, excerpt(body))
	}
	return m[1]
}

func bigOf(t *testing.T, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`id="` + id + `">[^<]*</h2>\s*<div class="big">(.*?)</div>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no tile %s: %s", id, excerpt(body))
	}
	return m[1]
}

// The shared rendering, filled in, is byte for byte the page rendered for
// the request with the same values, whatever the user's name holds; and
// every hole is in it (an age left out would be frozen at its rendering).
func TestOverviewSharedIsTheRenderedPage(t *testing.T) {
	e := newEnv(t)
	rev := e.seed(t, webState())
	waitFor(t, "kernel", func() bool { m, _ := e.panel.model(t.Context()); return m != nil && m.Rows[0].InKernel })
	waitFor(t, "a reconcile", func() bool { _, ok := e.core.LastReconcile(); return ok })
	ctx := t.Context()
	name := `m<i>"&'+` + "\x00x"
	e.post(t, "alice", "/services/web/servers/r1", url.Values{"name": {"r1"}, "address": {"198.18.0.11"}, "weight": {"5"}, "enabled": {"1"}, "stage": {"1"}, "base": {itoa64(rev)}})
	for _, u := range []who{{User: name, Role: "viewer"}, {User: name, Role: "operator"}, {User: name, Role: "admin"}, {User: "alice", Role: "admin"}} {
		u = whoOf(u.User, u.Role)
		key := e.core.KeyNow()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		draft := e.panel.draftBanner(ctx, u, key)
		if (draft != nil) != (u.User == "alice") {
			t.Fatalf("%s's draft: %+v", u.User, draft)
		}
		op, err := e.panel.overviewShared(r, u, key, draft)
		if err != nil {
			t.Fatal(err)
		}
		if len(op.page.at) != overviewHoles {
			t.Fatalf("%d holes in the shared overview, want %d", len(op.page.at), overviewHoles)
		}
		vals := []string{u.User, "1.5 s", "3 min ago", `2 s <ago>`}
		got := op.page.fill(nil, vals)
		pg, err := e.panel.overviewPageOf(r, u, key, draft, vals)
		if err != nil {
			t.Fatal(err)
		}
		want, err := e.panel.renderBytes(r, "overview", "layout", pg)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s/%s: the shared overview filled in differs from the page rendered:\n%s\n---\n%s", u.User, u.Role, got, want)
		}
		if bytes.Contains(got, []byte(e.panel.holes.prefix)) || bytes.Contains(got, []byte("<i>")) {
			t.Fatalf("a marker or an unescaped name left: %s", got)
		}
	}
	// The polled fragment too.
	m, _ := e.panel.model(ctx)
	kb := kernelOf(m.Snap)
	r := httptest.NewRequest(http.MethodGet, "/live/rows?problems=1&q=r", nil)
	u := whoOf("oscar", "operator")
	d := e.panel.liveDataOf(r, u, m, kb)
	d.Age = e.panel.holes.mark(0)
	b, _ := e.panel.renderBytes(r, "live_rows", "live_rows", d)
	frag := e.panel.holes.split(b)
	d.Age = "7.5 s"
	want, _ := e.panel.renderBytes(r, "live_rows", "live_rows", d)
	if got := frag.fill(nil, []string{"7.5 s"}); len(frag.at) != 1 || !bytes.Equal(got, want) {
		t.Fatalf("the shared fragment filled in differs: %d holes\n%s\n---\n%s", len(frag.at), got, want)
	}
}

// Each change a director sees shows on the next overview, never the page
// rendered before it: a write, a drain, a draft made and discarded, a
// real-server verify, a result and a revision stored by another process
// behind the daemon's back, a health change.
func TestOverviewShowsEveryChange(t *testing.T) {
	ln := acceptLoopback(t)
	e := newEnvStill(t, refusingSSH(t))
	st := webState()
	st.Services[0].Check = &ipvsmgr.Check{Type: "tcp", Address: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, Interval: 0.1, Timeout: 1, Rise: 1, Fall: 1}
	rev := e.seed(t, st)
	ctx := t.Context()
	page := func(user string) string {
		t.Helper()
		r := e.get(t, user, "/")
		if r.Code != http.StatusOK {
			t.Fatalf("overview: %d %s", r.Code, excerpt(r.Body))
		}
		return r.Body
	}
	waitFor(t, "both real servers checked up", func() bool { return strings.HasPrefix(tile(t, page("vic"), "health"), "2 up") })
	if got := bigOf(t, page("vic"), "t-vs"); got != "1" {
		t.Fatalf("services tile: %q", got)
	}

	// A write.
	api := ipvsmgr.Service{Name: "api", Address: "198.18.0.101", Port: 443, Servers: []ipvsmgr.Server{{Address: "198.18.0.21"}}}
	if _, err := e.core.AddService(ctx, server.Actor{Name: "bob", Via: "api"}, api, server.WriteOptions{NoWait: true}); err != nil {
		t.Fatal(err)
	}
	if got := bigOf(t, page("vic"), "t-vs"); got != "2" {
		t.Errorf("after a write, the services tile says %q, want 2", got)
	}

	// A drain.
	before := tile(t, page("vic"), "draining") + tile(t, page("vic"), "drained (weight 0)")
	if r := e.post(t, "oscar", "/services/web/servers/r1/drain", nil); r.Code != http.StatusSeeOther {
		t.Fatalf("drain: %d %s", r.Code, excerpt(r.Body))
	}
	body := page("vic")
	if after := tile(t, body, "draining") + tile(t, body, "drained (weight 0)"); after == before || !strings.Contains(after, "1") {
		t.Errorf("after a drain: draining+drained %q, was %q", after, before)
	}

	// A draft made, then discarded.
	if strings.Contains(page("alice"), "staged change") {
		t.Fatal("a draft banner before any draft")
	}
	cur, _ := e.core.CurrentRevision(ctx)
	e.post(t, "alice", "/services/web/servers/r2", url.Values{"name": {"r2"}, "address": {"198.18.0.12"}, "weight": {"7"}, "enabled": {"1"}, "stage": {"1"}, "base": {itoa64(cur)}})
	if body := page("alice"); !strings.Contains(body, "staged change") {
		t.Errorf("after a draft was made: %s", excerpt(body))
	}
	e.post(t, "alice", "/draft/discard", nil)
	if strings.Contains(page("alice"), "staged change") {
		t.Error("after the draft was discarded, its banner is still on the overview")
	}

	// A verify from the panel (every SSH port refuses: both unreachable).
	if strings.Contains(page("vic"), "not prepared") {
		t.Fatal("prep issues before any verify")
	}
	e.post(t, "alice", "/realservers/verify", url.Values{"rip": {"198.18.0.12"}})
	if got := tile(t, page("vic"), "real-server prep"); !strings.Contains(got, "1 not prepared") {
		t.Errorf("after a verify: %q", got)
	}

	// Another process (the CLI's realserver verify, which stores its own
	// results; a CLI write without the daemon's socket) writes the database.
	other, err := store.Open(ctx, e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.SaveResults(ctx, []arpguard.Result{{Target: "198.18.0.11", Host: "198.18.0.11", Action: "verify", State: arpguard.StateDrift,
		Drift: []string{"arp_ignore"}, At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other process's result on the overview", func() bool {
		return strings.Contains(tile(t, page("vic"), "real-server prep"), "2 not prepared")
	})
	cur, _ = e.core.CurrentRevision(ctx)
	st2, _, _ := e.core.State(ctx)
	st2.Services = st2.Services[:1]
	next, _, err := other.Commit(ctx, cur, st2, "carol", "cli", "rm api")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other process's revision on the overview", func() bool {
		body := page("vic")
		return strings.Contains(body, `href="/history/`+itoa64(next)+`">`+itoa64(next)+`<`) && bigOf(t, body, "t-vs") == "1"
	})
	if next <= rev {
		t.Fatalf("revision %d after %d", next, rev)
	}

	// A health change: the check's listener goes away. The reconcile it
	// wakes makes a new snapshot 50 ms later; before that only the health
	// count says it, and the overview must already show it.
	page("vic")
	ln.Close()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		snap := e.core.Snapshot()
		if !bothDown(ctx, e) {
			time.Sleep(time.Millisecond)
			continue
		}
		body := page("vic")
		if e.core.Snapshot() == snap && !strings.Contains(tile(t, body, "health"), "2 down") {
			t.Errorf("the health change is not on the overview: %q", tile(t, body, "health"))
		}
		break
	}
	waitFor(t, "the health change on the overview", func() bool {
		return strings.Contains(tile(t, page("vic"), "health"), "2 down")
	})
}

func bothDown(ctx context.Context, e *env) bool {
	hs, _ := e.core.HealthByServer(ctx)
	down := 0
	for _, h := range hs {
		if h.State == "down" {
			down++
		}
	}
	return down == 2
}

// A snapshot that stops moving (a hung poll) goes stale on the overview and
// in the polled fragment once two poll intervals pass, with no new snapshot
// to move the key: never a green page from before.
func TestOverviewFlagsAStaleSnapshot(t *testing.T) {
	t.Parallel()
	e := newEnvStill(t)
	e.seed(t, webState())
	waitFor(t, "kernel", func() bool { m, _ := e.panel.model(t.Context()); return m != nil && m.Rows[0].InKernel })
	body := e.get(t, "vic", "/").Body
	if !strings.Contains(body, "kernel OK") || strings.Contains(body, "STALE") {
		t.Fatalf("fresh: %s", excerpt(body))
	}
	frag := e.get(t, "vic", "/live/rows?problems=1").Body
	if strings.Contains(frag, "STALE") {
		t.Fatalf("fresh fragment: %s", frag)
	}
	// The daemon's first reconcile (its restore) may come after the seed on
	// a loaded machine and move the snapshot once: wait for one that holds
	// still for two poll intervals.
	for try := 0; ; try++ {
		snap := e.core.Snapshot()
		time.Sleep(time.Until(snap.At.Add(2*server.PollInterval + 100*time.Millisecond)))
		if e.core.Snapshot() == snap {
			break
		}
		if try == 3 {
			t.Fatal("the snapshot kept moving: the test shows nothing")
		}
	}
	body = e.get(t, "vic", "/").Body
	if !strings.Contains(body, "STALE") || strings.Contains(body, "kernel OK") {
		t.Errorf("a stale snapshot shown as fresh: %s", excerpt(body))
	}
	if frag := e.get(t, "vic", "/live/rows?problems=1").Body; !strings.Contains(frag, "STALE") {
		t.Errorf("a stale snapshot in the fragment shown as fresh: %s", frag)
	}
}

// The data's age is the request's, not the rendering's.
func TestOverviewAgePerRequest(t *testing.T) {
	e := newEnvStill(t)
	e.seed(t, webState())
	waitFor(t, "kernel", func() bool { m, _ := e.panel.model(t.Context()); return m != nil && m.Rows[0].InKernel })
	age := regexp.MustCompile(`id="t-age">Data age</h2>\s*<div class="big">([0-9.]+ s)</div>`)
	fragAge := regexp.MustCompile(`Kernel table read ([0-9.]+ s) ago`)
	a1, f1 := age.FindStringSubmatch(e.get(t, "vic", "/").Body), fragAge.FindStringSubmatch(e.get(t, "vic", "/live/rows").Body)
	time.Sleep(300 * time.Millisecond)
	a2, f2 := age.FindStringSubmatch(e.get(t, "vic", "/").Body), fragAge.FindStringSubmatch(e.get(t, "vic", "/live/rows").Body)
	if a1 == nil || a2 == nil || a1[1] == a2[1] {
		t.Errorf("the overview's data age did not move: %v %v", a1, a2)
	}
	if f1 == nil || f2 == nil || f1[1] == f2[1] {
		t.Errorf("the fragment's data age did not move: %v %v", f1, f2)
	}
}

// Users who see the overview alike share one rendering, never one another's
// name, role, draft or flash message; asked all at once, under -race.
func TestOverviewPerUser(t *testing.T) {
	e := newEnv(t)
	rev := e.seed(t, webState())
	waitFor(t, "kernel", func() bool { m, _ := e.panel.model(t.Context()); return m != nil && m.Rows[0].InKernel })
	e.auth.mu.Lock()
	e.auth.users["ann"] = "admin"
	e.auth.users["m<i>&'+"] = "viewer"
	e.auth.mu.Unlock()
	stage := func(user, weight string) {
		r := e.post(t, user, "/services/web/servers/r1", url.Values{"name": {"r1"}, "address": {"198.18.0.11"}, "weight": {weight}, "enabled": {"1"}, "stage": {"1"}, "base": {itoa64(rev)}})
		if r.Code != http.StatusSeeOther {
			t.Fatalf("stage: %d %s", r.Code, excerpt(r.Body))
		}
	}
	stage("alice", "5")
	banner := func(user string) string {
		d := e.panel.draftBanner(t.Context(), whoOf(user, "admin"), e.core.KeyNow())
		if d == nil {
			t.Fatalf("%s has no draft", user)
		}
		return "<strong>Draft:</strong> " + itoa(d.Changes) + " staged change"
	}
	type want struct {
		role, shown string
		admin       bool
		draft       string // "" for no banner
	}
	users := map[string]want{
		"alice": {"admin", "alice", true, banner("alice")}, "ann": {"admin", "ann", true, ""},
		"oscar": {"operator", "oscar", false, ""}, "vic": {"viewer", "vic", false, ""},
		"m<i>&'+": {"viewer", "m&lt;i&gt;&amp;&#39;&#43;", false, ""},
	}
	check := func(round int) {
		var wg sync.WaitGroup
		for user, w := range users {
			for range 4 {
				wg.Go(func() {
					body := e.get(t, user, "/").Body
					if !strings.Contains(body, `title="Your account">`+w.shown+` <span class="role">`+w.role+`</span>`) {
						t.Errorf("round %d: %s's overview does not name them as %s: %s", round, user, w.role, body)
					}
					for other, ow := range users {
						if other != user && strings.Contains(body, `>`+ow.shown+` <span class="role">`) {
							t.Errorf("round %d: %s's overview names %s", round, user, other)
						}
					}
					if got := strings.Contains(body, `href="/users"`); got != w.admin {
						t.Errorf("round %d: %s's overview: admin links %v", round, user, got)
					}
					if w.draft == "" && strings.Contains(body, "staged change") || w.draft != "" && !strings.Contains(body, w.draft) {
						t.Errorf("round %d: %s's overview, draft banner want %q: %s", round, user, w.draft, excerpt(body))
					}
				})
			}
		}
		wg.Wait()
	}
	check(1)
	stage("ann", "6")
	e.post(t, "ann", "/services", svcForm("name", "api"))
	w := users["ann"]
	w.draft = banner("ann")
	users["ann"] = w
	if w.draft == users["alice"].draft {
		t.Fatalf("ann's draft banner is alice's: %q", w.draft)
	}
	check(2)
	// A flash is its user's alone, and shown once.
	res := e.post(t, "oscar", "/services/web/servers/r2/drain", nil)
	flashed := e.followFlash(t, "oscar", res)
	if !strings.Contains(flashed.Body, `class="banner flash`) || !strings.Contains(flashed.Body, ">oscar <span") {
		t.Fatalf("oscar's flash: %s", excerpt(flashed.Body))
	}
	for user := range users {
		if body := e.get(t, user, "/").Body; strings.Contains(body, `class="banner flash`) {
			t.Errorf("%s sees a flash: %s", user, excerpt(body))
		}
	}
	// The drain moved the state under both drafts: their banners are counted again.
	for _, user := range []string{"alice", "ann"} {
		w := users[user]
		w.draft = banner(user) + "s on revision " + itoa64(rev) + " — <strong>the state has moved"
		users[user] = w
	}
	check(3)
}

// The drafts the core keeps in memory are what the store has: a draft
// staged, replaced and discarded in the panel reads back the same from a
// fresh core over the same database.
func TestDraftsKeptAreStored(t *testing.T) {
	e := newEnv(t)
	rev := e.seed(t, webState())
	ctx := context.Background()
	e.post(t, "alice", "/services/web/servers/r1", url.Values{"name": {"r1"}, "address": {"198.18.0.11"}, "weight": {"5"}, "enabled": {"1"}, "stage": {"1"}, "base": {itoa64(rev)}})
	kept, err := e.core.Draft(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := e.st.Draft(ctx, "alice")
	if err != nil || stored.Base != kept.Base || !bytes.Equal(stored.Doc, kept.Doc) {
		t.Fatalf("kept %+v, stored %+v (%v)", kept, stored, err)
	}
	kept.Doc = []byte("changed by a caller")
	if again, _ := e.core.Draft(ctx, "alice"); bytes.Equal(again.Doc, kept.Doc) {
		t.Fatal("a caller's change to its copy reached the kept draft")
	}
	e.post(t, "alice", "/services/web/servers/r1", url.Values{"name": {"r1"}, "address": {"198.18.0.11"}, "weight": {"7"}, "enabled": {"1"}, "base": {itoa64(rev)}})
	kept, _ = e.core.Draft(ctx, "alice")
	if fresh, err := server.New(server.Config{Store: e.st}).Draft(ctx, "alice"); err != nil || !bytes.Equal(fresh.Doc, kept.Doc) || !bytes.Contains(kept.Doc, []byte(`"weight":7`)) {
		t.Fatalf("replaced draft: kept %s, a fresh core reads %v (%v)", kept.Doc, fresh, err)
	}
	e.post(t, "alice", "/draft/discard", nil)
	if _, err := e.st.Draft(ctx, "alice"); err == nil {
		t.Fatal("discarded in memory only")
	}
	if _, err := server.New(server.Config{Store: e.st}).Draft(ctx, "alice"); err == nil {
		t.Fatal("a fresh core finds a discarded draft")
	}
}
