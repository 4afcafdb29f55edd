package httpd_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// An operator who runs "test this check now" 200 times makes at most
// server.CheckRunsPerUser checks a minute (the rest 429 with Retry-After),
// and the audit one row per outcome with a count, not 200 rows; the
// admin's own actions survive a prune by size that the operator's noise
// pushes over the budget.
func TestCheckNowFloodIsBoundedInRunsAndAuditRows(t *testing.T) {
	g := servertest.Start(t)
	doc := `{"services":[{"name":"web","address":"198.18.0.100","port":80,"check":{"type":"tcp","port":1,"timeout":0.2},
	 "servers":[{"name":"r1","address":"127.0.0.1"}]}]}`
	if resp, body := g.API(t, auth.Admin, "PUT", "/api/v1/state", doc); resp.StatusCode != 200 {
		t.Fatalf("PUT /state: %s %s", resp.Status, body)
	}
	if resp, body := g.API(t, auth.Admin, "PATCH", "/api/v1/services/web", `{"scheduler":"rr"}`); resp.StatusCode != 200 {
		t.Fatalf("the admin's change: %s %s", resp.Status, body)
	}
	ran, limited := 0, 0
	for range 200 {
		resp, body := do(t, g, g.Tokens[auth.Operator], "POST", "/api/v1/services/web/servers/r1/check", "")
		switch {
		case resp.StatusCode == 200:
			ran++
		case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "" && strings.Contains(body, "checks on demand within 1m0s"):
			limited++
		default:
			t.Fatalf("check now: %s %s", resp.Status, body)
		}
	}
	if ran != server.CheckRunsPerUser || limited != 200-server.CheckRunsPerUser {
		t.Errorf("%d checks ran and %d were refused, want %d and the rest", ran, limited, server.CheckRunsPerUser)
	}
	// Another user's are its own.
	if resp, body := do(t, g, g.Tokens[auth.Admin], "POST", "/api/v1/services/web/servers/r1/check", ""); resp.StatusCode != 200 {
		t.Errorf("the admin's check now after the operator's flood: %s %s", resp.Status, body)
	}
	ctx := context.Background()
	es, err := g.Store.Audit(ctx, store.AuditFilter{Action: "rs check", Actor: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, e := range es {
		total += max(e.Repeats, 1)
	}
	if len(es) > 2 || total != 200 {
		t.Errorf("the operator's 200 check runs are %d audit rows counting %d: %+v", len(es), total, es)
	}
	// Noise past the budget: the operator's rows go, the admin's change stays.
	for i := range 500 {
		if _, err := g.Store.WriteAudit(ctx, store.AuditEntry{At: time.Now(), Actor: "operator", Via: "api", Action: "rs drain",
			Target: "web r" + strings.Repeat("x", 1000) + string(rune('a'+i%26)), Outcome: store.OutcomeSuccess}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.Store.Prune(ctx, store.Retention{MaxAge: 24 * time.Hour, MaxBytes: 1}, time.Now()); err != nil {
		t.Fatal(err)
	}
	mine, err := g.Store.Audit(ctx, store.AuditFilter{Actor: "admin", Action: "vs set"})
	if err != nil || len(mine) != 1 {
		t.Errorf("the admin's change after the prune: %d rows, %v", len(mine), err)
	}
	if left, _ := g.Store.Audit(ctx, store.AuditFilter{Actor: "operator"}); len(left) != 0 {
		t.Errorf("%d of the operator's rows left over the budget, want none", len(left))
	}
}
