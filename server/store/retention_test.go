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
		if _, err := s.WriteAudit(ctx, AuditEntry{At: at, Actor: "a", Via: "cli", Action: "x", Outcome: OutcomeSuccess, Detail: big}); err != nil {
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
