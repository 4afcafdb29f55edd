package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// withStdin makes standard input read s (a file, not a terminal) for the
// rest of the test.
func withStdin(t *testing.T, s string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "stdin")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdin
	os.Stdin = f
	t.Cleanup(func() { os.Stdin = old; f.Close() })
}

// runAs runs a verb as OS user alice with the database db.
func runAs(t *testing.T, db string, args ...string) cliRun {
	t.Helper()
	var out, errb bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string {
		return map[string]string{"USER": "alice", "IPVSCTL_DB": db}[k]
	}}
	code := dispatch(env, args)
	return cliRun{code, out.String(), errb.String()}
}

func TestUserVerbs(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	step := func(want int, stdin string, args ...string) cliRun {
		t.Helper()
		withStdin(t, stdin)
		r := runAs(t, db, args...)
		if r.code != want {
			t.Fatalf("ipvsctl %s: exit %d, want %d\n%s%s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
		}
		return r
	}
	r := step(0, "", "user", "list")
	if !strings.Contains(r.stdout, "no user exists yet") || !strings.Contains(r.stdout, "ipvsctl user add NAME --role admin") {
		t.Fatalf("user list on a new database:\n%s", r.stdout)
	}
	r = step(0, "a long enough password\n", "user", "add", "ops", "--role", "admin", "--password-stdin")
	if r.stdout != "added user ops (admin)\n" {
		t.Fatalf("user add: %q", r.stdout)
	}
	// Bad input names the field and the value, exits 2, changes nothing.
	for _, c := range []struct {
		stdin string
		args  []string
		msg   string
	}{
		{"a long enough password\n", []string{"user", "add", "bad name", "--role", "viewer", "--password-stdin"}, `name: "bad name" is not a valid name`},
		{"a long enough password\n", []string{"user", "add", "bob", "--role", "root", "--password-stdin"}, `role: "root" is not a role (want admin, operator or viewer)`},
		{"short\n", []string{"user", "add", "bob", "--role", "viewer", "--password-stdin"}, "password: must be at least 12 characters (this one has 5)"},
		{"", []string{"user", "add", "bob", "--role", "viewer"}, "password: standard input is not a terminal"},
		{"a long enough password\n", []string{"user", "add", "ops", "--role", "viewer", "--password-stdin"}, `user "ops" already exists`},
		{"", []string{"user", "rm", "nobody"}, `user "nobody": not found`},
		{"", []string{"user", "set", "nobody", "--role", "viewer"}, `user "nobody": not found`},
		{"", []string{"user", "add"}, "want exactly one user NAME"},
		{"", []string{"user", "frob"}, `unknown verb "frob"`},
	} {
		r := step(2, c.stdin, c.args...)
		if !strings.Contains(r.stderr, c.msg) {
			t.Errorf("ipvsctl %s: %q, want %q", strings.Join(c.args, " "), r.stderr, c.msg)
		}
	}
	if r := step(1, "", "user", "rm", "ops"); !strings.Contains(r.stderr, `user "ops" is the last admin (add another admin first)`) {
		t.Fatalf("rm the last admin: %s", r.stderr)
	}
	step(0, "another long password\r\n", "user", "add", "olga", "--role", "operator", "--password-stdin")
	step(0, "", "user", "set", "olga", "--role", "viewer")
	step(0, "a newer long password\n", "user", "passwd", "olga", "--password-stdin")
	r = step(0, "", "user", "list")
	if !strings.Contains(r.stdout, "olga  viewer") || !strings.Contains(r.stdout, "ops   admin") {
		t.Fatalf("user list:\n%s", r.stdout)
	}
	r = step(0, "", "user", "list", "--json")
	var users []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &users); err != nil || len(users) != 2 || users[0]["name"] != "olga" {
		t.Fatalf("user list --json: %v\n%s", err, r.stdout)
	}
	if strings.Contains(r.stdout, "argon2") || strings.Contains(r.stdout, "password") {
		t.Fatalf("user list shows a hash:\n%s", r.stdout)
	}
	// The password from stdin (without its CR LF) is the one that logs in.
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := auth.New(st, auth.Config{})
	if _, err := a.Login(ctx, "olga", "a newer long password", "198.18.0.1"); err != nil {
		t.Fatalf("login with the password set by user passwd: %v", err)
	}
	step(0, "", "user", "rm", "olga")
	if _, err := st.UserByName(ctx, "olga"); err == nil {
		t.Fatal("olga still there")
	}
}

func TestTokenAndAuditVerbs(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	withStdin(t, "a long enough password\n")
	if r := runAs(t, db, "user", "add", "ci", "--role", "operator", "--password-stdin"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	r := runAs(t, db, "token", "create", "--user", "ci", "--name", "deploy", "--expires", "30d")
	token := strings.TrimSuffix(r.stdout, "\n")
	if r.code != 0 || !strings.HasPrefix(token, "ipvsctl_") || strings.Contains(token, "\n") || strings.Contains(token, " ") {
		t.Fatalf("token create: %d stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, `"deploy"`) || !strings.Contains(r.stderr, "acts as ci") || !strings.Contains(r.stderr, "shown this once") {
		t.Fatalf("token create note: %s", r.stderr)
	}
	// The token works against the API's checks.
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tok, err := st.ActiveToken(ctx, "deploy")
	if err != nil || tok.ExpiresAt == nil || tok.ExpiresAt.Sub(tok.CreatedAt).Hours() != 720 {
		t.Fatalf("stored token: %+v %v", tok, err)
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"token", "create", "--user", "ci", "--expires", "soon"}, 2, `expires: "soon" is not a positive duration`},
		{[]string{"token", "create", "--user", "ci", "--name", "deploy"}, 2, `token "deploy" already exists`},
		{[]string{"token", "create", "--user", "nobody"}, 2, `ipvsctl token create: user "nobody": not found`},
		{[]string{"token", "create"}, 2, "--user NAME is required"},
		{[]string{"token", "revoke", "nothing"}, 2, `ipvsctl token revoke: token "nothing": not found`},
		{[]string{"audit", "--since", "yesterday"}, 2, `since: "yesterday" is neither`},
	} {
		r := runAs(t, db, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("ipvsctl %s: %d %q, want %d %q", strings.Join(c.args, " "), r.code, r.stderr, c.code, c.msg)
		}
	}
	r = runAs(t, db, "token", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "deploy") || !strings.Contains(r.stdout, tok.Prefix) || !strings.Contains(r.stdout, "active") {
		t.Fatalf("token list:\n%s", r.stdout)
	}
	r2 := runAs(t, db, "token", "list", "--json")
	secret := token[len(token)-43:]
	if strings.Contains(r.stdout+r2.stdout, secret) || strings.Contains(r2.stdout, tok.Hash) || !strings.Contains(r2.stdout, `"prefix": "`+tok.Prefix) {
		t.Fatalf("token list shows a secret or hash:\n%s", r2.stdout)
	}
	if r := runAs(t, db, "token", "revoke", tok.Prefix); r.code != 0 || !strings.Contains(r.stdout, `revoked token 1 "deploy"`) {
		t.Fatalf("token revoke: %d %s%s", r.code, r.stdout, r.stderr)
	}
	if r := runAs(t, db, "token", "list"); !strings.Contains(r.stdout, "revoked") {
		t.Fatalf("token list after revoke:\n%s", r.stdout)
	}
	// Every write above is in the audit, as alice via cli, refusals too.
	r = runAs(t, db, "audit", "--json", "--limit", "100")
	var entries []store.AuditEntry
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil {
		t.Fatalf("audit --json: %v\n%s", err, r.stdout)
	}
	var got []string
	for _, e := range entries {
		if e.Actor != "alice" || e.Via != "cli" {
			t.Errorf("audit entry: %+v", e)
		}
		got = append(got, e.Action+" "+e.Target+" "+e.Outcome)
	}
	want := []string{"token revoke " + tok.Prefix + " success", "token revoke nothing failure", "token create nobody-* failure",
		"token create deploy failure", "token create deploy success", "user add ci success"}
	if len(got) == len(want) && strings.HasPrefix(got[2], "token create nobody-") {
		got[2] = "token create nobody-* failure"
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("audit:\n%q\nwant\n%q", got, want)
	}
	r = runAs(t, db, "audit", "--action", "token create", "--limit", "1")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || len(lines) != 2 || !strings.Contains(lines[1], "alice") ||
		!strings.Contains(lines[1], "local") || !strings.Contains(lines[1], "failure") {
		t.Fatalf("audit --action --limit:\n%s", r.stdout)
	}
	if r := runAs(t, db, "audit", "--actor", "bob"); r.code != 0 || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("audit --actor bob:\n%s", r.stdout)
	}
}
