package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// dropSchema empties the database of every table, as an ipvsctl that knew no
// migration left it, so a test can build an older schema.
func dropSchema(t *testing.T, s *Store) {
	t.Helper()
	rows, err := s.db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'schema_migrations'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	for _, n := range tables {
		if _, err := s.db.Exec(`DROP TABLE "` + n + `"`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.db.Exec(`DELETE FROM schema_migrations`); err != nil {
		t.Fatal(err)
	}
}

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func TestUsers(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	if n, err := s.CountUsers(ctx); err != nil || n != 0 {
		t.Fatalf("count on a new database: %d %v", n, err)
	}
	if _, err := s.CreateUser(ctx, "alice", "admin", "h1", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateUser(ctx, "alice", "viewer", "h2", t0); !errors.Is(err, ErrExists) {
		t.Fatalf("second alice: %v", err)
	}
	if _, err := s.CreateUser(ctx, "bob", "root", "h2", t0); err == nil {
		t.Fatal("role root stored")
	}
	if _, err := s.UserByName(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown user: %v", err)
	}
	u, err := s.UserByName(ctx, "alice")
	if err != nil || u.Role != "admin" || u.PasswordHash != "h1" || !u.CreatedAt.Equal(t0) {
		t.Fatalf("alice: %+v %v", u, err)
	}
	// The only admin stays one.
	if err := s.SetUserRole(ctx, "alice", "viewer", t0); !errors.Is(err, ErrLastAdmin) {
		t.Fatalf("demote last admin: %v", err)
	}
	if err := s.DeleteUser(ctx, "alice"); !errors.Is(err, ErrLastAdmin) {
		t.Fatalf("remove last admin: %v", err)
	}
	s.CreateUser(ctx, "bob", "operator", "hb", t0)
	if err := s.SetUserRole(ctx, "bob", "admin", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUserRole(ctx, "alice", "viewer", t0); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUserRole(ctx, "carol", "viewer", t0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("role of unknown user: %v", err)
	}
	users, err := s.Users(ctx)
	if err != nil || len(users) != 2 || users[0].Name != "alice" || users[0].Role != "viewer" || users[1].Role != "admin" {
		t.Fatalf("users: %+v %v", users, err)
	}
}

// A new password ends the user's sessions; removing a user ends its sessions
// and tokens.
func TestPasswordAndRemovalEndSessionsAndTokens(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	alice, _ := s.CreateUser(ctx, "alice", "admin", "h1", t0)
	bob, _ := s.CreateUser(ctx, "bob", "viewer", "h2", t0)
	for _, se := range []*Session{
		{IDHash: "a1", UserID: alice.ID, CreatedAt: t0, LastSeenAt: t0, IdleExpiresAt: t0.Add(time.Hour), ExpiresAt: t0.Add(time.Hour)},
		{IDHash: "b1", UserID: bob.ID, CreatedAt: t0, LastSeenAt: t0, IdleExpiresAt: t0.Add(time.Hour), ExpiresAt: t0.Add(time.Hour)},
	} {
		if err := s.CreateSession(ctx, se); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateToken(ctx, &Token{UserName: "bob", Name: "ci", Prefix: "p1", Hash: "x1", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUserPassword(ctx, "alice", "h9", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionByHash(ctx, "a1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("alice's session after a password change: %v", err)
	}
	if se, err := s.SessionByHash(ctx, "b1"); err != nil || se.UserName != "bob" || se.Role != "viewer" {
		t.Fatalf("bob's session: %+v %v", se, err)
	}
	if err := s.DeleteUser(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionByHash(ctx, "b1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob's session after removal: %v", err)
	}
	if _, err := s.TokenByPrefix(ctx, "p1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob's token after removal: %v", err)
	}
	if err := s.DeleteUser(ctx, "bob"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("remove twice: %v", err)
	}
}

func TestSessionsExpire(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	u, _ := s.CreateUser(ctx, "alice", "admin", "h1", t0)
	s.CreateSession(ctx, &Session{IDHash: "old", UserID: u.ID, CreatedAt: t0, LastSeenAt: t0, IdleExpiresAt: t0.Add(30 * time.Minute), ExpiresAt: t0.Add(12 * time.Hour), ClientAddr: "198.18.0.1"})
	s.CreateSession(ctx, &Session{IDHash: "new", UserID: u.ID, CreatedAt: t0, LastSeenAt: t0, IdleExpiresAt: t0.Add(30 * time.Minute), ExpiresAt: t0.Add(12 * time.Hour)})
	if err := s.TouchSession(ctx, "new", t0.Add(20*time.Minute), t0.Add(50*time.Minute)); err != nil {
		t.Fatal(err)
	}
	n, err := s.DeleteExpiredSessions(ctx, t0.Add(40*time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("expired: %d %v", n, err)
	}
	se, err := s.SessionByHash(ctx, "new")
	if err != nil || !se.IdleExpiresAt.Equal(t0.Add(50*time.Minute)) || !se.LastSeenAt.Equal(t0.Add(20*time.Minute)) {
		t.Fatalf("touched session: %+v %v", se, err)
	}
	if err := s.DeleteSession(ctx, "new"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionByHash(ctx, "new"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after logout: %v", err)
	}
}

func TestTokens(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	s.CreateUser(ctx, "alice", "operator", "h1", t0)
	exp := t0.Add(time.Hour)
	id, err := s.CreateToken(ctx, &Token{UserName: "alice", Name: "ci", Prefix: "0a1b2c3d", Hash: "hash1", CreatedAt: t0, ExpiresAt: &exp})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateToken(ctx, &Token{UserName: "alice", Name: "ci", Prefix: "ffff0000", Hash: "hash2", CreatedAt: t0}); !errors.Is(err, ErrExists) {
		t.Fatalf("second active ci: %v", err)
	}
	if _, err := s.CreateToken(ctx, &Token{UserName: "nobody", Name: "x", Prefix: "ffff0001", Hash: "hash3", CreatedAt: t0}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("token of unknown user: %v", err)
	}
	for _, ref := range []string{"ci", "0a1b2c3d", "1"} {
		tok, err := s.ActiveToken(ctx, ref)
		if err != nil || tok.ID != id || tok.UserName != "alice" || tok.Role != "operator" || !tok.ExpiresAt.Equal(exp) {
			t.Fatalf("token by %q: %+v %v", ref, tok, err)
		}
	}
	if err := s.TouchToken(ctx, id, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(ctx, id, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(ctx, id, t0.Add(2*time.Minute)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoke twice: %v", err)
	}
	if _, err := s.ActiveToken(ctx, "ci"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoked token still active: %v", err)
	}
	tok, err := s.TokenByPrefix(ctx, "0a1b2c3d")
	if err != nil || tok.RevokedAt == nil || tok.LastUsedAt == nil || !tok.LastUsedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("revoked token: %+v %v", tok, err)
	}
	// A revoked token's name may be used again.
	if _, err := s.CreateToken(ctx, &Token{UserName: "alice", Name: "ci", Prefix: "ffff0000", Hash: "hash2", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	all, err := s.Tokens(ctx)
	if err != nil || len(all) != 2 || all[1].ExpiresAt != nil {
		t.Fatalf("tokens: %+v %v", all, err)
	}
}

func TestAuditFilters(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	rev := int64(7)
	for i, e := range []AuditEntry{
		{Actor: "alice", Via: "panel", ClientAddr: "198.18.0.1", Action: "login", Outcome: OutcomeSuccess},
		{Actor: "root", Via: "cli", Action: "user add", Target: "bob", Outcome: OutcomeSuccess},
		{Actor: "alice", Via: "api", ClientAddr: "198.18.0.1", Action: "vs add", Target: "web", Revision: &rev, Outcome: OutcomeSuccess},
		{Actor: "mallory", Via: "panel", ClientAddr: "203.0.113.9", Action: "login", Outcome: OutcomeFailure, Detail: "unknown user"},
	} {
		e.At = t0.Add(time.Duration(i) * time.Minute)
		if _, err := s.WriteAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.WriteAudit(ctx, AuditEntry{Actor: "x", Via: "telnet", Action: "a", Outcome: OutcomeSuccess}); err == nil {
		t.Fatal("via telnet stored")
	}
	list := func(f AuditFilter) []string {
		t.Helper()
		es, err := s.Audit(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.Actor+" "+e.Action)
		}
		return out
	}
	check := func(got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("got %q, want %q", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("got %q, want %q", got, want)
			}
		}
	}
	check(list(AuditFilter{}), "mallory login", "alice vs add", "root user add", "alice login")
	check(list(AuditFilter{Limit: 2}), "mallory login", "alice vs add")
	check(list(AuditFilter{Actor: "alice"}), "alice vs add", "alice login")
	check(list(AuditFilter{Action: "login"}), "mallory login", "alice login")
	check(list(AuditFilter{Since: t0.Add(90 * time.Second)}), "mallory login", "alice vs add")
	check(list(AuditFilter{Contains: "LOG"}), "mallory login", "alice login")
	check(list(AuditFilter{Contains: "web"}), "alice vs add")      // the target
	check(list(AuditFilter{Contains: "unknown"}), "mallory login") // the detail
	check(list(AuditFilter{Contains: "b", Actor: "root"}), "root user add")
	check(list(AuditFilter{Contains: "%"}))
	es, _ := s.Audit(ctx, AuditFilter{Action: "vs add"})
	if es[0].Revision == nil || *es[0].Revision != 7 || es[0].Via != "api" || !es[0].At.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("entry: %+v", es[0])
	}
	es, _ = s.Audit(ctx, AuditFilter{Action: "user add"})
	if es[0].Revision != nil {
		t.Fatalf("revision of a user add: %v", *es[0].Revision)
	}
}

// A user's last login is the newest successful one since the user was made.
func TestLastLogin(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	for i, e := range []AuditEntry{
		{Actor: "alice", Via: "panel", Action: "login", Outcome: OutcomeSuccess},  // a former alice's
		{Actor: "alice", Via: "api", Action: "login", Outcome: OutcomeSuccess},    // 1 min
		{Actor: "alice", Via: "panel", Action: "login", Outcome: OutcomeFailure},  // 2 min
		{Actor: "alice", Via: "panel", Action: "vs add", Outcome: OutcomeSuccess}, // 3 min
		{Actor: "bob", Via: "panel", Action: "login", Outcome: OutcomeSuccess},    // 4 min
	} {
		e.At = t0.Add(time.Duration(i) * time.Minute)
		if _, err := s.WriteAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		user  string
		since time.Time
		want  time.Time
	}{
		{"alice", t0.Add(30 * time.Second), t0.Add(time.Minute)},
		{"alice", t0.Add(90 * time.Second), time.Time{}},
		{"bob", t0, t0.Add(4 * time.Minute)},
		{"carol", t0, time.Time{}},
	} {
		got, err := s.LastLogin(ctx, c.user, c.since)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("LastLogin(%s, since %s) = %s, %v; want %s", c.user, c.since, got, err, c.want)
		}
	}
}
