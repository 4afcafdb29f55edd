package httpd_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// weightCell is the configured weight of a real server's row on a
// service's page (its "Weight cfg/kernel" cell's first half).
func weightCell(t *testing.T, page, rs string) string {
	t.Helper()
	i := strings.Index(page, `<td><a href="/services/web/servers/`+rs+`">`)
	if i < 0 {
		t.Fatalf("no row for %s:\n%s", rs, page)
	}
	row := page[i:]
	j := strings.Index(row, `<td class="num">`)
	j = j + strings.Index(row[j+1:], `<td class="num">`) + 1 // the second: the first is the port
	k := strings.Index(row[j:], "</td>")
	cfg, _, _ := strings.Cut(strings.TrimPrefix(row[j:j+k], `<td class="num">`), " / ")
	return cfg
}

// A draft started through the API (what ipvsctl --server ... draft start
// sends) is the panel's at once, though the panel had drawn pages for its
// user before: the panel's next edit is staged in it, not made live.
func TestDraftStartedThroughTheAPIStagesPanelEdits(t *testing.T) {
	g := servertest.Start(t)
	setUp(t, g)
	ctx := context.Background()
	_, base, _ := g.Core.State(ctx)
	admin := panelLogin(t, g, "admin")
	for _, path := range []string{"/", "/services", "/services/web", "/draft"} {
		if resp, body := g.Panel(t, admin, "GET", path, nil); resp.StatusCode != 200 || strings.Contains(body, "<strong>Draft:</strong>") {
			t.Fatalf("%s before any draft: %s, banner %v", path, resp.Status, strings.Contains(body, "<strong>Draft:</strong>"))
		}
	}
	if resp, body := g.API(t, auth.Admin, "POST", "/api/v1/draft/start", ""); resp.StatusCode != 200 || !strings.Contains(body, `"base": `+strconv.FormatInt(base, 10)) {
		t.Fatalf("API draft start: %s %s", resp.Status, body)
	}
	if _, body := g.Panel(t, admin, "GET", "/services/web", nil); !strings.Contains(body, "<strong>Draft:</strong> 0 staged changes on revision "+strconv.FormatInt(base, 10)) {
		t.Fatalf("the panel does not show the draft the API started:\n%s", body)
	}
	g.Kernel.Ops() // forget the setup's
	resp, body := g.Panel(t, admin, "POST", "/services/web/servers/r1", url.Values{"name": {"r1"}, "address": {"198.18.0.11"},
		"weight": {"5"}, "enabled": {"1"}, "base": {strconv.FormatInt(base, 10)}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("panel edit: %s %s", resp.Status, body)
	}
	st, rev, _ := g.Core.State(ctx)
	if rev != base || st.Services[0].Servers[0].EffectiveWeight() != 3 {
		t.Fatalf("the panel's edit went live: revision %d (was %d), r1's weight %d", rev, base, st.Services[0].Servers[0].EffectiveWeight())
	}
	if ops := g.Kernel.Ops(); len(ops) != 0 {
		t.Fatalf("staged only, yet the kernel got %q", ops)
	}
	if resp, body := g.API(t, auth.Admin, "GET", "/api/v1/draft/diff", ""); resp.StatusCode != 200 || !strings.Contains(body, "weight: 3 -\\u003e 5") {
		t.Fatalf("the API's draft lacks the panel's edit: %s %s", resp.Status, body)
	}
	_, page := g.Panel(t, admin, "GET", "/services/web", nil)
	if got := weightCell(t, page, "r1"); got != "5" {
		t.Fatalf("r1's configured weight on the panel: %q, want the draft's 5", got)
	}
	if !strings.Contains(page, "<strong>Draft:</strong> ") || strings.Contains(page, "<strong>Draft:</strong> 0 staged") {
		t.Fatalf("banner after the staged edit:\n%s", page)
	}
	// Discarded through the API: the panel's next edit is live again.
	if resp, body := g.API(t, auth.Admin, "DELETE", "/api/v1/draft", ""); resp.StatusCode/100 != 2 {
		t.Fatalf("API discard: %s %s", resp.Status, body)
	}
	resp, body = g.Panel(t, admin, "POST", "/services/web/servers/r1", url.Values{"name": {"r1"}, "address": {"198.18.0.11"},
		"weight": {"6"}, "enabled": {"1"}, "base": {strconv.FormatInt(base, 10)}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("panel edit after the discard: %s %s", resp.Status, body)
	}
	if st, rev, _ := g.Core.State(ctx); rev == base || st.Services[0].Servers[0].EffectiveWeight() != 6 {
		t.Fatalf("after the API discarded the draft the panel's edit was not made live: revision %d, weight %d", rev, st.Services[0].Servers[0].EffectiveWeight())
	}
}

// The reverse: a draft started in the panel takes the API's staged edits,
// and the panel shows them at once (its pages, its banner, its apply).
func TestDraftStartedInThePanelTakesAPIEdits(t *testing.T) {
	g := servertest.Start(t)
	setUp(t, g)
	ctx := context.Background()
	_, base, _ := g.Core.State(ctx)
	admin := panelLogin(t, g, "admin")
	g.Panel(t, admin, "GET", "/services/web", nil)
	if resp, body := g.Panel(t, admin, "POST", "/draft/start", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("panel draft start: %s %s", resp.Status, body)
	}
	if _, page := g.Panel(t, admin, "GET", "/services/web", nil); weightCell(t, page, "r1") != "3" {
		t.Fatalf("r1 before any edit: %q", weightCell(t, page, "r1"))
	}
	resp, body := g.API(t, auth.Admin, "PATCH", "/api/v1/services/web/servers/r1?draft=true", `{"weight":4}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"author": "admin"`) || !strings.Contains(body, `"base": `+strconv.FormatInt(base, 10)) {
		t.Fatalf("API staged edit: %s %s", resp.Status, body)
	}
	if _, rev, _ := g.Core.State(ctx); rev != base {
		t.Fatalf("staged only, yet revision %d (was %d)", rev, base)
	}
	_, page := g.Panel(t, admin, "GET", "/services/web", nil)
	if got := weightCell(t, page, "r1"); got != "4" {
		t.Fatalf("r1's configured weight on the panel after the API staged 4: %q", got)
	}
	if !strings.Contains(page, "<strong>Draft:</strong> 1 staged change on revision "+strconv.FormatInt(base, 10)) {
		t.Fatalf("the panel's banner does not count the API's staged edit:\n%s", page)
	}
	// The panel's own edit joins the API's in the same draft; applied in
	// the panel, both go live as one revision.
	if resp, body := g.Panel(t, admin, "POST", "/services/web/servers/r2", url.Values{"name": {"r2"}, "address": {"198.18.0.12"},
		"weight": {"2"}, "enabled": {"1"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("panel edit: %s %s", resp.Status, body)
	}
	if resp, body := g.Panel(t, admin, "POST", "/draft/apply", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("panel draft apply: %s %s", resp.Status, body)
	}
	st, rev, _ := g.Core.State(ctx)
	if rev != base+1 || st.Services[0].Servers[0].EffectiveWeight() != 4 || st.Services[0].Servers[1].EffectiveWeight() != 2 {
		t.Fatalf("applied draft: revision %d (want %d), weights %d and %d (want 4 and 2)", rev, base+1,
			st.Services[0].Servers[0].EffectiveWeight(), st.Services[0].Servers[1].EffectiveWeight())
	}
	if resp, _ := g.API(t, auth.Admin, "GET", "/api/v1/draft", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the applied draft is still there for the API: %s", resp.Status)
	}
}
