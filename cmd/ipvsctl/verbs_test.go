package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

// A state built with the fine-grained verbs, as a script would: each write is
// a revision and reconciles the kernel at once.
func TestScriptingVerbs(t *testing.T) {
	k := fakekernel.New()
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	step := func(want int, args ...string) cliRun {
		t.Helper()
		r := runCLI(t, k, append([]string{"--db", db}, args...)...)
		if r.code != want {
			t.Fatalf("ipvsctl %s: exit %d, want %d\n%s%s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
		}
		return r
	}
	step(0, "vs", "add", "web", "--address", "198.18.0.100", "--port", "80", "--scheduler", "wrr")
	step(0, "rs", "add", "web", "--name", "r1", "--address", "198.18.0.11", "--weight", "3")
	step(0, "rs", "add", "web", "--address", "198.18.0.12")
	if diff := cmp.Diff([]string{
		"ipvsadm -A -t 198.18.0.100:80 -s wrr",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 3",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 1",
	}, k.Ops()); diff != "" {
		t.Fatalf("kernel ops (-want +got):\n%s", diff)
	}
	step(0, "rs", "drain", "web", "r1")
	step(0, "vs", "set", "web", "--scheduler", "rr")
	if diff := cmp.Diff([]string{
		"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 0",
		"ipvsadm -E -t 198.18.0.100:80 -s rr",
	}, k.Ops()); diff != "" {
		t.Fatalf("in-place edits (-want +got):\n%s", diff)
	}
	// Bad input names the field and value, exits 2, and changes nothing.
	r := step(2, "rs", "set", "web", "198.18.0.12", "--weight", "70000")
	if !strings.Contains(r.stderr, "services[0].servers[1].weight: 70000 is out of range 0..65535") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	step(2, "rs", "rm", "web", "r9")
	step(2, "vs", "add", "web", "--address", "198.18.0.100", "--port", "81")
	step(0, "vs", "add", "dns", "--protocol", "udp", "--address", "198.18.0.53", "--port", "53", "--no-apply")
	if ops := k.Ops(); len(ops) != 0 {
		t.Fatalf("--no-apply touched the kernel: %v", ops)
	}
	r = step(0, "vs", "list")
	if !strings.Contains(r.stdout, "web   tcp 198.18.0.100:80  rr") || !strings.Contains(r.stdout, "dns   udp 198.18.0.53:53") {
		t.Fatalf("vs list:\n%s", r.stdout)
	}
	r = step(0, "rs", "list", "web", "--json")
	if !strings.Contains(r.stdout, `"drained": true`) || strings.Contains(r.stdout, `"weight": 0`) || !strings.Contains(r.stdout, `"service": "web"`) {
		t.Fatalf("rs list --json:\n%s", r.stdout)
	}
	r = step(0, "history")
	if !strings.Contains(r.stdout, "vs add dns") || !strings.Contains(r.stdout, "rs drain web r1") {
		t.Fatalf("history:\n%s", r.stdout)
	}
	r = step(0, "history", "5")
	if !strings.Contains(r.stdout, `~ service web scheduler: "wrr" -> "rr"`) {
		t.Fatalf("history 5:\n%s", r.stdout)
	}
	// Roll back to revision 3 (before the drain, the scheduler change and dns,
	// which --no-apply kept out of the kernel).
	step(0, "rollback", "3")
	if diff := cmp.Diff([]string{
		"ipvsadm -E -t 198.18.0.100:80 -s wrr",
		"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 3",
	}, k.Ops()); diff != "" {
		t.Fatalf("rollback (-want +got):\n%s", diff)
	}
	step(0, "vs", "disable", "web")
	step(0, "vs", "enable", "web")
	step(0, "rs", "disable", "web", "198.18.0.12")
	step(0, "vs", "rm", "web")
	if ops := k.Ops(); ops[len(ops)-1] != "ipvsadm -D -t 198.18.0.100:80" {
		t.Fatalf("vs rm: %v", ops)
	}
}

// The kernel is emptied (as a reboot leaves it); restore brings it back.
func TestRestore(t *testing.T) {
	k := fakekernel.New()
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	doc := writeDoc(t, webDoc)
	if r := runCLI(t, k, "--db", db, "apply", "-f", doc); r.code != 0 {
		t.Fatal(r.stderr)
	}
	before, _ := k.Table(context.Background())
	k2 := fakekernel.New()
	r := runCLI(t, k2, "--db", db, "restore")
	if r.code != 0 || !strings.Contains(r.stdout, "3 changes applied, 0 failed") {
		t.Fatalf("restore: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	after, _ := k2.Table(context.Background())
	if ops := ipvsmgr.Diff(before, after, ipvsmgr.DiffOptions{}); len(ops) != 0 || len(after.Services) != 1 {
		t.Fatalf("restored table differs from the one before: %v", ops)
	}
}

func TestImportExport(t *testing.T) {
	k := fakekernel.New()
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	saved := "-A -t 198.18.0.100:80 -s wrr\n-a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 3\n-a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 1\n"
	r := runCLI(t, k, "--db", db, "import", "--format", "ipvsadm", writeDoc(t, saved))
	if r.code != 0 || !strings.Contains(r.stdout, "3 changes applied, 0 failed") {
		t.Fatalf("import: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, k, "--db", db, "export", "--format", "ipvsadm")
	if r.code != 0 || r.stdout != saved {
		t.Fatalf("export round trip: %d\n%q\nwant\n%q", r.code, r.stdout, saved)
	}
	// Malformed input names the line and leaves the stored state alone.
	r = runCLI(t, k, "--db", db, "import", "--format", "ipvsadm", writeDoc(t, saved+"-a -t 198.18.0.100:80 -r bogus -g\n"))
	if r.code != 2 || !strings.Contains(r.stderr, "line 4") {
		t.Fatalf("bad import: %d\n%s", r.code, r.stderr)
	}
	if r = runCLI(t, k, "--db", db, "export"); !strings.Contains(r.stdout, `"198.18.0.12"`) {
		t.Fatalf("stored state changed by a failed import:\n%s", r.stdout)
	}
	if r = runCLI(t, k, "--db", db, "export", "--format", "xml"); r.code != 2 {
		t.Fatalf("unknown format: %d %s", r.code, r.stderr)
	}
}

func TestApplyBaseRevision(t *testing.T) {
	k := fakekernel.New()
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	doc := writeDoc(t, webDoc)
	runCLI(t, k, "--db", db, "apply", "-f", doc)
	runCLI(t, k, "--db", db, "rs", "drain", "web", "198.18.0.12")
	r := runCLI(t, k, "--db", db, "apply", "--base", "1", "-f", doc)
	if r.code != 1 || !strings.Contains(r.stderr, "changed since revision 1 (now at revision 2)") {
		t.Fatalf("stale apply: %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, k, "--db", db, "apply", "--base", "2", "-f", doc); r.code != 0 {
		t.Fatalf("current base refused: %s", r.stderr)
	}
}

// On a terminal, a large import counts its services as it reads them, on
// one line cleared before the result.
func TestImportCountsServicesOnATerminal(t *testing.T) {
	var errb bytes.Buffer
	env := &cliEnv{stderr: &errb, terminal: func() bool { return true }}
	var doc strings.Builder
	for i := range 300 {
		fmt.Fprintf(&doc, "-A -t 198.18.%d.%d:80 -s wlc\n-a -t 198.18.%d.%d:80 -r 198.18.9.9:80 -g -w 1\n", i/250, 1+i%250, i/250, 1+i%250)
	}
	r := env.servicesRead(iotest.OneByteReader(strings.NewReader(doc.String())), "ipvsadm")
	if _, err := io.ReadAll(r); err != nil {
		t.Fatal(err)
	}
	if got := errb.String(); !strings.HasSuffix(got, "import: 300 services read") {
		t.Fatalf("progress: %q", got[max(0, len(got)-80):])
	}
}
