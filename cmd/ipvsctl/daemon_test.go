package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// goldenSession runs the golden transcript's session through env's setup
// and returns the transcript.
func goldenSession(t *testing.T, dir string, env func(out, errb *bytes.Buffer) *cliEnv) string {
	t.Helper()
	doc := filepath.Join(dir, "state.json")
	if err := os.WriteFile(doc, []byte(webDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, args := range goldenArgs(doc) {
		var out, errb bytes.Buffer
		code := dispatch(env(&out, &errb), args)
		fmt.Fprintf(&b, "$ ipvsctl %s\n%s%s[exit %d]\n\n", strings.Join(args, " "), out.String(), errb.String(), code)
	}
	return strings.ReplaceAll(b.String(), dir, "$TMP")
}

// The golden session gives the same transcript, byte for byte, when every
// verb goes to a daemon over the API with a token (--server) as when the
// CLI does the work itself.
func TestGoldenSessionThroughTheAPI(t *testing.T) {
	g := servertest.Start(t)
	got := goldenSession(t, t.TempDir(), func(out, errb *bytes.Buffer) *cliEnv {
		return &cliEnv{stdout: out, stderr: errb, getenv: func(k string) string {
			return map[string]string{"USER": "alice", "IPVSCTL_SERVER": g.URL, "IPVSCTL_TOKEN": g.Tokens[auth.Admin]}[k]
		}}
	})
	want, err := os.ReadFile(filepath.Join("testdata", "session.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("through the API the session differs from testdata/session.golden:\n%s", got)
	}
}

// With a daemon running, the CLI's verbs go to it over the socket beside
// the database: the daemon's kernel gets the changes, the CLI's own never
// does, and the history names the CLI's user.
func TestCLIWritesGoThroughTheDaemon(t *testing.T) {
	g := servertest.Start(t)
	own := fakekernel.New()
	run := func(args ...string) cliRun {
		var out, errb bytes.Buffer
		env := &cliEnv{stdout: &out, stderr: &errb, kernel: own, getenv: func(k string) string {
			return map[string]string{"USER": "bob", "IPVSCTL_DB": g.DB}[k]
		}}
		code := dispatch(env, args)
		return cliRun{code, out.String(), errb.String()}
	}
	if r := run("vs", "add", "web", "--address", "198.18.0.100", "--port", "80"); r.code != 0 {
		t.Fatalf("vs add: %+v", r)
	}
	if r := run("rs", "add", "web", "--address", "198.18.0.11"); r.code != 0 || !strings.Contains(r.stdout, "ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1") {
		t.Fatalf("rs add: %+v", r)
	}
	if ops := own.Ops(); len(ops) != 0 {
		t.Errorf("the CLI wrote its own kernel while a daemon runs: %q", ops)
	}
	if ops := g.Kernel.Ops(); len(ops) != 2 {
		t.Errorf("daemon's kernel ops: %q", ops)
	}
	if r := run("history"); !strings.Contains(r.stdout, "bob  cli  rs add web 198.18.0.11") {
		t.Errorf("history:\n%s", r.stdout)
	}
	if r := run("rs", "rm", "web", "nope"); r.code != exitUsage || !strings.Contains(r.stderr, `has no real server "nope"`) {
		t.Errorf("an error through the daemon: %+v", r)
	}
}

// The CLI (through the socket) and the API write at once: no update is lost.
func TestCLIAndAPIWritersLoseNothing(t *testing.T) {
	g := servertest.Start(t)
	var out, errb bytes.Buffer
	if code := dispatch(&cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string {
		return map[string]string{"IPVSCTL_DB": g.DB}[k]
	}}, []string{"vs", "add", "web", "--address", "198.18.0.100", "--port", "80"}); code != 0 {
		t.Fatalf("vs add: %s", errb.String())
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out, errb bytes.Buffer
			env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string {
				m := map[string]string{"IPVSCTL_DB": g.DB}
				if i%2 == 1 { // half through the API with a token
					m["IPVSCTL_SERVER"], m["IPVSCTL_TOKEN"] = g.URL, g.Tokens[auth.Admin]
				}
				return m[k]
			}}
			if code := dispatch(env, []string{"rs", "add", "web", "--address", fmt.Sprintf("198.18.2.%d", i+1)}); code != 0 {
				t.Errorf("rs add %d: %s", i, errb.String())
			}
		}()
	}
	wg.Wait()
	st, err := store.Open(context.Background(), g.DB)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cur, _, err := st.Current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cur.Services[0].Servers); n != 16 {
		t.Fatalf("%d real servers stored, want 16", n)
	}
	tbl, _ := g.Kernel.Table(context.Background())
	if n := len(tbl.Services[0].Dests); n != 16 {
		t.Fatalf("%d real servers in the kernel, want 16", n)
	}
}
