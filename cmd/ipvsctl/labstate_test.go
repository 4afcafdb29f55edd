package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

// labState is the lab's example state, also the first document docs/state.md shows.
const labState = "../../scripts/lab/state.json"

// TestLabStateApplies applies scripts/lab/state.json as it is against the fake
// kernel: every service and real server of the lab reaches the kernel.
func TestLabStateApplies(t *testing.T) {
	k := fakekernel.New()
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	r := runCLI(t, k, "--db", db, "apply", "-f", labState)
	if r.code != 0 {
		t.Fatalf("apply -f %s: exit %d\n%s%s", labState, r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"ipvsadm -A -t 198.18.0.100:80 -s wlc",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 1",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.13:80 -g -w 2",
		"ipvsadm -A -t 198.18.0.110:80 -s rr",
		"ipvsadm -a -t 198.18.0.110:80 -r 198.18.1.11:80 -m -w 1",
		"ipvsadm -a -t 198.18.0.110:80 -r 198.18.1.12:80 -m -w 1",
		"7 changes applied, 0 failed",
	} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("apply output lacks %q:\n%s", want, r.stdout)
		}
	}
	if r = runCLI(t, k, "--db", db, "diff"); r.stdout != "# kernel matches the desired state\n" {
		t.Errorf("diff after apply: %q %s", r.stdout, r.stderr)
	}
}

// TestStateDocShowsLabState: the first JSON document in docs/state.md is the
// lab's state file, byte for byte, so the example a reader copies is one apply takes.
func TestStateDocShowsLabState(t *testing.T) {
	readme, err := os.ReadFile("../../docs/state.md")
	if err != nil {
		t.Fatal(err)
	}
	state, err := os.ReadFile(labState)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```json\n")
	if !ok {
		t.Fatal("docs/state.md has no ```json block")
	}
	doc, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/state.md's first ```json block is not closed")
	}
	if doc != string(state) {
		t.Errorf("docs/state.md's first JSON document differs from %s:\n%s", labState, doc)
	}
}
