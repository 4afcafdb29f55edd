package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

type cliRun struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, k *fakekernel.Kernel, args ...string) cliRun {
	t.Helper()
	var out, errb bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	if k != nil {
		env.kernel = k
	}
	code := dispatch(env, args)
	return cliRun{code, out.String(), errb.String()}
}

func writeDoc(t *testing.T, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const webDoc = `{"services":[{"name":"web","address":"198.18.0.100","port":80,"scheduler":"wrr",
 "servers":[{"address":"198.18.0.11","weight":3},{"address":"198.18.0.12","weight":1}]}]}`

func TestApplyDiffStatus(t *testing.T) {
	k := fakekernel.New()
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	doc := writeDoc(t, webDoc)

	r := runCLI(t, k, "--db", db, "diff", "-f", doc)
	wantDiff := "ipvsadm -A -t 198.18.0.100:80 -s wrr\n" +
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 3\n" +
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 1\n"
	if r.code != 0 || r.stdout != wantDiff {
		t.Fatalf("diff: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if len(k.Ops()) != 0 {
		t.Fatal("diff changed the kernel")
	}
	r = runCLI(t, k, "apply", "--db", db, "-f", doc)
	if r.code != 0 || r.stdout != wantDiff+"3 changes applied, 0 failed\n" {
		t.Fatalf("apply: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, k, "--db", db, "diff", "-f", doc)
	if r.stdout != "# kernel matches the desired state\n" {
		t.Fatalf("diff after apply: %q", r.stdout)
	}
	r = runCLI(t, k, "--db", db, "status")
	if r.code != 0 || !strings.Contains(r.stdout, "TCP  198.18.0.100:80 wrr") || !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), "-> 198.18.0.11:80 dr 3 0 0") {
		t.Fatalf("status:\n%s%s", r.stdout, r.stderr)
	}
	r = runCLI(t, k, "--db", db, "status", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"scheduler": "wrr"`) || !strings.Contains(r.stdout, `"weight": 3`) {
		t.Fatalf("status --json:\n%s", r.stdout)
	}
	// The last real-server verify shows beside the table. One kept by an
	// older ipvsctl in a file beside the database moves into the database.
	oldFile := filepath.Join(filepath.Dir(db), "realserver-results.json")
	results := &arpguard.JSONFileStore{Path: oldFile}
	if err := results.SaveResults(context.Background(), []arpguard.Result{{Target: "198.18.0.11", Host: "198.18.0.11", Action: "verify",
		State: arpguard.StateDrift, Drift: []string{"VIP 198.18.0.100 missing on lo"}}}); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, k, "--db", db, "status")
	if !strings.Contains(r.stdout, "198.18.0.11") || !strings.Contains(r.stdout, "drift: VIP 198.18.0.100 missing on lo") {
		t.Fatalf("status without the real-server result:\n%s", r.stdout)
	}
	if _, err := os.Stat(oldFile); err == nil {
		t.Fatalf("%s is still there after its results moved into the database", oldFile)
	}
	r = runCLI(t, k, "--db", db, "status")
	if !strings.Contains(r.stdout, "drift: VIP 198.18.0.100 missing on lo") {
		t.Fatalf("status lost the real-server result after the move:\n%s", r.stdout)
	}
}

func TestExitCodes(t *testing.T) {
	k := fakekernel.New()
	db := filepath.Join(t.TempDir(), "db")
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--help"}, 0, ""},
		{[]string{"apply", "--help"}, 0, ""},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
		{[]string{}, 2, "usage"},
		{[]string{"apply"}, 2, "-f FILE is required"},
		{[]string{"apply", "--nope"}, 2, "flag provided but not defined"},
		{[]string{"apply", "--db", db, "-f", "/nonexistent/state.json"}, 1, "open state document"},
		{[]string{"apply", "--db", db, "-f", writeDoc(t, `{"services":[{"address":"198.18.0.1","port":99999,"servers":[]}]}`)}, 2,
			"services[0].port: 99999 is out of range 1..65535"},
		{[]string{"status", "extra"}, 2, "takes no arguments"},
	}
	for _, c := range cases {
		r := runCLI(t, k, c.args...)
		if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.msg) {
			t.Errorf("ipvsctl %v: code %d, want %d with %q\n%s%s", c.args, r.code, c.code, c.msg, r.stdout, r.stderr)
		}
	}
	for _, verb := range []string{"apply", "diff", "status"} {
		if r := runCLI(t, k, verb, "--help"); r.code != 0 || !strings.Contains(r.stdout, "usage: ipvsctl "+verb) {
			t.Errorf("%s --help: %d %q", verb, r.code, r.stdout)
		}
	}
}

func TestApplyReportsFailuresAndExits1(t *testing.T) {
	k := fakekernel.New()
	k.FailOn = func(op ipvsmgr.Op) error {
		if op.Kind == ipvsmgr.OpAddDest && op.Dest.Weight == 1 {
			return syscall.EINVAL
		}
		return nil
	}
	r := runCLI(t, k, "--db", filepath.Join(t.TempDir(), "db"), "apply", "-f", writeDoc(t, webDoc))
	if r.code != 1 || !strings.Contains(r.stderr, "failed: web: ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 1: invalid argument") ||
		!strings.Contains(r.stdout, "2 changes applied, 1 failed") {
		t.Fatalf("code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
