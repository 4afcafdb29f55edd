package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestGoldenSession runs a scripted session of verbs against a fake kernel and
// compares everything they print (and their exit status) with a golden
// transcript. Regenerate with go test -run TestGoldenSession -update.
func TestGoldenSession(t *testing.T) {
	k := fakekernel.New()
	dir := t.TempDir()
	db := filepath.Join(dir, "ipvsctl.db")
	doc := filepath.Join(dir, "state.json")
	if err := os.WriteFile(doc, []byte(webDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	session := goldenArgs(doc)
	var b bytes.Buffer
	for _, args := range session {
		var out, errb bytes.Buffer
		env := &cliEnv{stdout: &out, stderr: &errb, kernel: k, getenv: func(k string) string {
			return map[string]string{"USER": "alice", "IPVSCTL_DB": db}[k]
		}}
		code := dispatch(env, args)
		fmt.Fprintf(&b, "$ ipvsctl %s\n%s%s[exit %d]\n\n", strings.Join(args, " "), out.String(), errb.String(), code)
	}
	got := strings.ReplaceAll(b.String(), dir, "$TMP")
	golden := filepath.Join("testdata", "session.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("session differs from %s (run with -update after checking):\n%s", golden, got)
	}
}

// goldenArgs is the scripted session of the golden transcript.
func goldenArgs(doc string) [][]string {
	return [][]string{
		{"apply", "-f", doc},
		{"vs", "add", "dns", "--protocol", "udp", "--address", "198.18.0.53", "--port", "53", "--scheduler", "sh", "--scheduler-flags", "port"},
		{"rs", "add", "dns", "--name", "ns1", "--address", "198.18.0.21", "--weight", "2"},
		{"rs", "add", "dns", "--address", "198.18.0.22", "--upper-threshold", "100"},
		{"vs", "list"},
		{"rs", "list", "dns"},
		{"rs", "drain", "web", "198.18.0.11"},
		{"rs", "list", "web"},
		{"vs", "set", "web", "--persistence", "300", "--persistence-netmask", "255.255.255.0"},
		{"diff"},
		{"status"},
		{"status", "--states"},
		{"export", "--format", "ipvsadm"},
		{"rs", "enable", "web", "198.18.0.11"},
		{"rs", "list", "web"},
		{"rs", "set", "dns", "ns1", "--weight", "-1"},
		{"vs", "add", "bad", "--address", "198.18.0.300", "--port", "0", "--scheduler", "fastest"},
		{"rs", "rm", "dns", "nope"},
		{"rollback", "1"},
		{"vs", "disable", "dns"},
		{"export"},
	}
}
