package auth

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server/store"
)

// clock is a settable time for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	a     *Auth
	st    *store.Store
	path  string
	clock *clock
	cli   *Principal
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ipvsctl.db")
	st, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &clock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	if cfg.Params == (Params{}) {
		cfg.Params = CheapParams()
	}
	cfg.Now = c.Now
	return &fixture{a: New(st, cfg), st: st, path: path, clock: c, cli: &Principal{User: "root", Via: ViaCLI}}
}

const pw = "correct horse battery"

func (f *fixture) addUser(t *testing.T, name string, role Role) {
	t.Helper()
	if err := f.a.AddUser(context.Background(), f.cli, name, role, pw+" "+name); err != nil {
		t.Fatal(err)
	}
}

// rawRows reads a whole table as text, bypassing the store.
func rawRows(t *testing.T, path, table string) []string {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT * FROM ` + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for i, v := range vals {
			b.WriteString(cols[i] + "=" + v.String + " ")
		}
		out = append(out, b.String())
	}
	return out
}

func audits(t *testing.T, st *store.Store, action string) []store.AuditEntry {
	t.Helper()
	es, err := st.Audit(context.Background(), store.AuditFilter{Action: action, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func TestPasswordHashRoundTrip(t *testing.T) {
	for _, p := range []Params{CheapParams(), DefaultParams()} {
		h, err := HashPassword(p, pw)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h, "$argon2id$v=19$m=") || strings.Count(h, "$") != 5 {
			t.Fatalf("not a PHC string: %s", h)
		}
		if ok, err := VerifyPassword(h, pw); !ok || err != nil {
			t.Fatalf("right password refused: %v", err)
		}
		if ok, _ := VerifyPassword(h, pw+"!"); ok {
			t.Fatal("wrong password accepted")
		}
		h2, _ := HashPassword(p, pw)
		if h2 == h {
			t.Fatal("two hashes of one password are equal (no salt?)")
		}
	}
	if h, _ := HashPassword(DefaultParams(), pw); !strings.HasPrefix(h, "$argon2id$v=19$m=65536,t=1,p=2$") {
		t.Fatalf("default parameters: %s", h)
	}
	for _, bad := range []string{"", "$2a$10$abc", "$argon2id$v=19$m=4294967295,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5", "$argon2i$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5"} {
		if ok, err := VerifyPassword(bad, pw); ok || err == nil {
			t.Errorf("hash %q: ok %v err %v", bad, ok, err)
		}
	}
}

func TestPolicies(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{CheckPassword("short"), "password: must be at least 12 characters (this one has 5)"},
		{CheckPassword(strings.Repeat("x", 1025)), "password: must be at most 1024 bytes"},
		{CheckName("name", ""), `name: "" is not a valid name`},
		{CheckName("name", "bad name"), `name: "bad name" is not a valid name (1..64 printable characters`},
		{CheckName("name", "evil\nline"), `name: "evil\nline" is not a valid name`},
		{CheckName("user", strings.Repeat("a", 65)), `user: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"... (65 characters) is not a valid name`},
	} {
		var inv *InvalidError
		if !errors.As(c.err, &inv) || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("got %v, want %q", c.err, c.want)
		}
	}
	if CheckPassword("twelve chars") != nil || CheckName("name", "alice.ops-1") != nil || CheckName("name", strings.Repeat("é", 64)) != nil {
		t.Error("a valid password or name refused")
	}
	if _, err := ParseRole("root"); err == nil || !strings.Contains(err.Error(), `role: "root" is not a role (want admin, operator or viewer)`) {
		t.Errorf("ParseRole root: %v", err)
	}
	// Allows: viewer < operator < admin; Public is anyone's.
	for _, c := range []struct {
		have, need Role
		ok         bool
	}{
		{Viewer, Viewer, true}, {Viewer, Operator, false}, {Viewer, Admin, false},
		{Operator, Viewer, true}, {Operator, Operator, true}, {Operator, Admin, false},
		{Admin, Admin, true}, {roleUnset, Viewer, false}, {roleUnset, Public, true}, {Admin, roleUnset, false},
	} {
		if Allows(c.have, c.need) != c.ok {
			t.Errorf("Allows(%s, %s) = %v", c.have, c.need, !c.ok)
		}
	}
}

// An unknown user's login does the same password check as a known user's,
// against a hash of the same costs.
func TestNoUserEnumeration(t *testing.T) {
	f := newFixture(t, Config{Params: Params{Memory: 128, Time: 2, Threads: 1, SaltLen: 16, KeyLen: 32}})
	f.addUser(t, "alice", Admin)
	var calls atomic.Int32
	var costs []string
	f.a.verify = func(encoded, password string) (bool, error) {
		calls.Add(1)
		p, _, _, err := parseHash(encoded)
		if err != nil {
			t.Errorf("verify against a bad hash %q", encoded)
		}
		costs = append(costs, encodeHash(p, nil, nil))
		return VerifyPassword(encoded, password)
	}
	ctx := context.Background()
	_, errKnown := f.a.Login(ctx, "alice", "wrong password!", "198.18.0.1")
	_, errUnknown := f.a.Login(ctx, "mallory", "wrong password!", "198.18.0.2")
	if calls.Load() != 2 {
		t.Fatalf("password checks: %d, want one per login", calls.Load())
	}
	if costs[0] != costs[1] || !strings.Contains(costs[1], "m=128,t=2,p=1") {
		t.Fatalf("dummy hash costs %q differ from a real one's %q", costs[1], costs[0])
	}
	if errKnown != ErrBadCredentials || errUnknown != ErrBadCredentials {
		t.Fatalf("errors differ: %v / %v", errKnown, errUnknown)
	}
	// The audit says which it was; the caller is not told.
	es := audits(t, f.st, "login")
	if len(es) != 2 || !strings.HasPrefix(es[0].Detail, "unknown user") || es[1].Detail != "wrong password" || es[0].Outcome != "failure" {
		t.Fatalf("audit: %+v", es)
	}
}

// A hash made with older costs is upgraded at the next good login.
func TestRehashOnLogin(t *testing.T) {
	f := newFixture(t, Config{})
	f.addUser(t, "alice", Admin)
	g := New(f.st, Config{Params: Params{Memory: 256, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}, Now: f.clock.Now})
	if _, err := g.Login(context.Background(), "alice", pw+" alice", "198.18.0.1"); err != nil {
		t.Fatal(err)
	}
	u, _ := f.st.UserByName(context.Background(), "alice")
	if !strings.Contains(u.PasswordHash, "m=256,") {
		t.Fatalf("hash not upgraded: %s", u.PasswordHash)
	}
	if _, err := g.Login(context.Background(), "alice", pw+" alice", "198.18.0.1"); err != nil {
		t.Fatalf("login after the upgrade: %v", err)
	}
}

func TestUserManagementAudited(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	f.addUser(t, "alice", Admin)
	var inv *InvalidError
	if err := f.a.AddUser(ctx, f.cli, "bob", Viewer, "short"); !errors.As(err, &inv) || inv.Field != "password" {
		t.Fatalf("short password: %v", err)
	}
	if err := f.a.AddUser(ctx, f.cli, "bad name", Viewer, pw); !errors.As(err, &inv) || inv.Field != "name" {
		t.Fatalf("bad name: %v", err)
	}
	if err := f.a.AddUser(ctx, f.cli, "alice", Viewer, pw); !errors.Is(err, store.ErrExists) {
		t.Fatalf("alice twice: %v", err)
	}
	if err := f.a.SetRole(ctx, f.cli, "alice", Viewer); !errors.Is(err, store.ErrLastAdmin) {
		t.Fatalf("demote the last admin: %v", err)
	}
	if err := f.a.SetPassword(ctx, f.cli, "alice", pw+" new"); err != nil {
		t.Fatal(err)
	}
	if err := f.a.RemoveUser(ctx, f.cli, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("remove nobody: %v", err)
	}
	es, _ := f.st.Audit(ctx, store.AuditFilter{})
	var got []string
	for _, e := range es {
		if e.Actor != "root" || e.Via != "cli" {
			t.Errorf("audit entry by %s via %s", e.Actor, e.Via)
		}
		got = append(got, e.Action+" "+e.Target+" "+e.Outcome)
	}
	want := []string{"user rm nobody failure", "user passwd alice success", "user set alice failure",
		"user add alice failure", "user add bad name failure", "user add bob failure", "user add alice success"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("audit:\n%q\nwant\n%q", got, want)
	}
	// No row anywhere holds a password.
	for _, table := range []string{"users", "audit"} {
		for _, row := range rawRows(t, f.path, table) {
			if strings.Contains(row, pw) {
				t.Fatalf("%s holds a password: %s", table, row)
			}
		}
	}
}
