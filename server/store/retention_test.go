package store

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Audit rows and health transitions older than the age go; while the
// database is over its size, the oldest go first; ended sessions go.
func TestPruneByAgeAndSize(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ipvsctl.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	big := strings.Repeat("x", 2000)
	for i := range 2000 {
		at := now.Add(-time.Duration(2000-i) * time.Hour) // 2000 hours back up to now: ~83 days
		if i < 100 {
			at = now.AddDate(0, 0, -100) // older than 90 days
		}
		if _, err := s.WriteAudit(ctx, AuditEntry{At: at, Actor: "otto", Via: "api", Action: "x", Outcome: OutcomeSuccess, Detail: big}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.ExecContext(ctx, `INSERT INTO health_transitions (service, server, at, from_state, to_state, reason)
			VALUES ('web', 'r1', ?, 'up', 'down', ?)`, dbTime(at), big); err != nil {
			t.Fatal(err)
		}
	}
	u, err := s.CreateUser(ctx, "vera", "viewer", "x", now)
	if err != nil {
		t.Fatal(err)
	}
	for i, end := range []time.Time{now.Add(-time.Minute), now.Add(time.Hour)} {
		if err := s.CreateSession(ctx, &Session{IDHash: fmt.Sprint(i), UserID: u.ID, CreatedAt: now.Add(-2 * time.Hour),
			LastSeenAt: now.Add(-2 * time.Hour), IdleExpiresAt: end, ExpiresAt: end}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := s.Prune(ctx, Retention{MaxAge: 90 * 24 * time.Hour}, now)
	if err != nil || p.Audit != 100 || p.Transitions != 100 || p.Sessions != 1 {
		t.Fatalf("by age: %+v, %v", p, err)
	}
	used, _ := s.usedBytes(ctx)
	limit := used / 2
	p, err = s.Prune(ctx, Retention{MaxAge: 90 * 24 * time.Hour, MaxBytes: limit}, now)
	if err != nil || p.Audit == 0 || p.Transitions == 0 {
		t.Fatalf("by size: %+v, %v", p, err)
	}
	if used, _ = s.usedBytes(ctx); used > limit {
		t.Fatalf("still %d bytes used, limit %d", used, limit)
	}
	es, _ := s.Audit(ctx, AuditFilter{Limit: 1})
	if len(es) != 1 || !es[0].At.Equal(now.Add(-time.Hour)) {
		t.Fatalf("the newest row is gone: %+v", es)
	}
}

// Pruning by size never removes an admin's action younger than MaxAge,
// however much operator noise fills the space: the noise goes (oldest
// first), and when only admins' rows are left the prune stops there. A
// refused login naming an admin is noise (anyone can send it).
func TestPruneBySizeKeepsAdminActions(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ipvsctl.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, u := range []struct{ name, role string }{{"ada", "admin"}, {"otto", "operator"}} {
		if _, err := s.CreateUser(ctx, u.name, u.role, "x", now); err != nil {
			t.Fatal(err)
		}
	}
	big := strings.Repeat("x", 2000)
	admins := 0
	for i := range 3000 {
		at := now.Add(-time.Duration(3000-i) * time.Minute)
		e := AuditEntry{At: at, Actor: "otto", Via: "panel", Action: "rs check", Target: fmt.Sprint("web r", i), Outcome: OutcomeSuccess, Detail: big}
		switch {
		case i%50 == 0:
			e.Actor, e.Action, e.Target = "ada", "vs set", "web"
			admins++
		case i%50 == 1:
			e.Actor, e.Via, e.Action, e.Target = "root", "cli", "apply", "state.json"
			admins++
		case i%50 == 2:
			e.Actor, e.Action, e.Outcome, e.ClientAddr = "ada", "login", OutcomeFailure, fmt.Sprint("198.18.7.", i%250)
		}
		if _, err := s.WriteAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	used, _ := s.usedBytes(ctx)
	// A budget smaller than the admins' rows alone: all the noise goes.
	p, err := s.Prune(ctx, Retention{MaxAge: 90 * 24 * time.Hour, MaxBytes: used / 100}, now)
	if err != nil || p.Audit == 0 {
		t.Fatalf("by size: %+v, %v", p, err)
	}
	es, err := s.Audit(ctx, AuditFilter{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	kept, noise := 0, 0
	for _, e := range es {
		if e.Via == "cli" || e.Actor == "ada" && e.Action != "login" {
			kept++
		} else {
			noise++
		}
	}
	t.Logf("pruned %d rows to %d bytes' budget: %d admin actions kept, %d other rows left", p.Audit, used/100, kept, noise)
	if kept != admins {
		t.Errorf("%d of the %d admin actions kept, want all", kept, admins)
	}
	if noise != 0 {
		t.Errorf("%d rows of noise left while over the budget, want none", noise)
	}
}
