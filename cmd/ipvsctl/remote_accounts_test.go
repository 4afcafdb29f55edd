package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// accountSteps is a session of user and token verbs, each with what it
// reads on standard input; the users admin, operator and viewer exist.
var accountSteps = []struct {
	stdin string
	args  []string
}{
	{"", []string{"user", "list"}},
	{"a long enough password\n", []string{"user", "add", "bob", "--role", "viewer", "--password-stdin"}},
	{"a long enough password\n", []string{"user", "add", "bob", "--role", "viewer", "--password-stdin"}},
	{"short\n", []string{"user", "add", "carol", "--role", "viewer", "--password-stdin"}},
	{"a long enough password\n", []string{"user", "add", "bad name", "--role", "viewer", "--password-stdin"}},
	{"a long enough password\n", []string{"user", "add", "carol", "--role", "root", "--password-stdin"}},
	{"", []string{"user", "set", "bob", "--role", "operator"}},
	{"", []string{"user", "set", "nobody", "--role", "operator"}},
	{"", []string{"user", "set", "admin", "--role", "viewer"}},
	{"", []string{"user", "rm", "admin"}},
	{"another long password\n", []string{"user", "passwd", "bob", "--password-stdin"}},
	{"tiny\n", []string{"user", "passwd", "bob", "--password-stdin"}},
	{"another long password\n", []string{"user", "passwd", "nobody", "--password-stdin"}},
	{"", []string{"user", "list"}},
	{"", []string{"user", "list", "--json"}},
	{"", []string{"token", "create", "--user", "bob", "--name", "deploy", "--expires", "30d"}},
	{"", []string{"token", "create", "--user", "bob", "--name", "deploy"}},
	{"", []string{"token", "create", "--user", "bob", "--expires", "soon"}},
	{"", []string{"token", "create", "--user", "nobody"}},
	{"", []string{"token", "list", "--json"}},
	{"", []string{"token", "revoke", "deploy"}},
	{"", []string{"token", "revoke", "deploy"}},
	{"", []string{"user", "rm", "bob"}},
	{"", []string{"user", "rm", "bob"}},
	{"", []string{"user", "list"}},
}

var (
	reTime   = regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?`)
	reSecret = regexp.MustCompile(`ipvsctl_[0-9a-f]{8}_[A-Za-z0-9_-]{43}`)
	rePrefix = regexp.MustCompile(`\b[0-9a-f]{8}\b`)
	reUsed   = regexp.MustCompile(`"last_used_at": [^\n]*`)
)

// normalize hides what differs between two directors by nature: times,
// token secrets and prefixes, and when a token was last used.
func normalize(s string) string {
	s = reUsed.ReplaceAllString(s, `"last_used_at": X`)
	s = reSecret.ReplaceAllString(s, "SECRET")
	s = reTime.ReplaceAllString(s, "TIME")
	return rePrefix.ReplaceAllString(s, "PREFIX")
}

// runAccountSteps runs the session with the environment vars and returns
// its transcript.
func runAccountSteps(t *testing.T, vars map[string]string) string {
	t.Helper()
	var b strings.Builder
	for _, s := range accountSteps {
		withStdin(t, s.stdin)
		var out, errb bytes.Buffer
		env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }}
		code := dispatch(env, s.args)
		b.WriteString("$ ipvsctl " + strings.Join(s.args, " ") + "\n" + out.String() + errb.String())
		b.WriteString("[exit " + string(rune('0'+code)) + "]\n")
	}
	return normalize(b.String())
}

// seedAccounts makes the rig's users and tokens (admin, operator and
// viewer, each with a token) in a director's own database.
func seedAccounts(t *testing.T, db string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := auth.New(st, auth.Config{Params: auth.CheapParams()})
	root := &auth.Principal{User: "root", Role: auth.Admin, Via: "cli"}
	for _, role := range []auth.Role{auth.Admin, auth.Operator, auth.Viewer} {
		if err := a.AddUser(ctx, root, role.String(), role, "correct horse battery"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.CreateToken(ctx, root, role.String(), "", 0); err != nil {
			t.Fatal(err)
		}
	}
}

// recorder forwards to the daemon and keeps every request's URL and headers.
type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (rc *recorder) proxy(t *testing.T, target string) string {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		h, _ := json.Marshal(r.Header)
		rc.seen = append(rc.seen, r.Method+" "+r.URL.String()+" "+string(h))
		rc.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// ipvsctl user and token with --server give, verb for verb, the output and
// exit status they give on the director itself; the writes land in the
// daemon's database (never in a local one), audited as the token's user
// via the API, with no password in a URL, a header or the audit.
func TestUserAndTokenVerbsThroughTheAPI(t *testing.T) {
	localDB := filepath.Join(t.TempDir(), "ipvsctl.db")
	seedAccounts(t, localDB)
	local := runAccountSteps(t, map[string]string{"USER": "alice", "IPVSCTL_DB": localDB})

	g := servertest.Start(t)
	var rc recorder
	untouched := filepath.Join(t.TempDir(), "never.db")
	remote := runAccountSteps(t, map[string]string{"USER": "alice", "IPVSCTL_DB": untouched,
		"IPVSCTL_SERVER": rc.proxy(t, g.URL), "IPVSCTL_TOKEN": g.Tokens[auth.Admin]})
	if diff := cmp.Diff(local, remote); diff != "" {
		t.Fatalf("through the API the session differs from the director's (-local +remote):\n%s", diff)
	}
	for _, want := range []string{"added user bob (viewer)\n[exit 0]", `user "bob" already exists` + "\n[exit 2]",
		"password: must be at least 12 characters (this one has 5)\n[exit 2]", `role: "root" is not a role`,
		`user "admin" is the last admin (add another admin first)` + "\n[exit 1]", `user "nobody": not found` + "\n[exit 2]",
		"SECRET\nipvsctl token create: token 4 \"deploy\"", `token "deploy": not found` + "\n[exit 2]",
		`expires: "soon" is not a positive duration`} {
		if !strings.Contains(local, want) {
			t.Errorf("the session lacks %q:\n%s", want, local)
		}
	}
	if _, err := os.Stat(untouched); err == nil {
		t.Errorf("a verb with --server made the local database %s", untouched)
	}
	// The writes are the daemon's: bob was added, made operator, removed.
	ctx := context.Background()
	entries, err := g.Store.Audit(ctx, store.AuditFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.Actor == "root" {
			continue // the rig's own users
		}
		if e.Actor != "admin" || e.Via != "api" || e.ClientAddr == "" {
			t.Errorf("audit entry: %+v", e)
		}
		if strings.Contains(e.Detail+e.Target, "long enough password") || strings.Contains(e.Detail, "another long password") {
			t.Errorf("a password in the audit: %+v", e)
		}
		got = append(got, normalize(e.Action+" "+e.Target+" "+e.Outcome))
	}
	want := []string{"user rm bob failure", "user rm bob success", "token revoke deploy failure", "token revoke deploy success",
		"token create nobody-PREFIX failure", "token create deploy failure", "token create deploy success",
		"user passwd nobody failure", "user passwd bob success", "user rm admin failure", "user set admin failure",
		"user set nobody failure", "user set bob success", "user add bob failure", "user add bob success"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the daemon's audit (-want +got):\n%s", diff)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, s := range rc.seen {
		if strings.Contains(s, "password") && !strings.Contains(s, "/password ") || strings.Contains(s, "long enough") || strings.Contains(s, "another long") {
			t.Errorf("a password in a request's URL or headers: %s", s)
		}
	}
	if len(rc.seen) < len(accountSteps)-6 {
		t.Errorf("only %d requests reached the daemon", len(rc.seen))
	}
}
