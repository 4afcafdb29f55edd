package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

// Without a daemon: checked servers are in as configured, the status has a
// health column saying no checks run, `health` lists them, and a forced
// health is a revision that the kernel follows at once.
func TestHealthVerbsWithoutDaemon(t *testing.T) {
	k := fakekernel.New()
	dir := t.TempDir()
	db := filepath.Join(dir, "ipvsctl.db")
	doc := filepath.Join(dir, "state.json")
	os.WriteFile(doc, []byte(`{"services":[{"name":"web","address":"198.18.0.100","port":80,"scheduler":"wrr",
 "check":{"type":"http","path":"/healthz","interval":1,"rise":2,"fall":2},
 "servers":[{"name":"r1","address":"198.18.0.11","weight":3},{"name":"r2","address":"198.18.0.12"}]}]}`), 0o600)
	step := func(want int, args ...string) cliRun {
		t.Helper()
		r := runCLI(t, k, append([]string{"--db", db}, args...)...)
		if r.code != want {
			t.Fatalf("ipvsctl %s: exit %d, want %d\n%s%s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
		}
		return r
	}
	step(0, "apply", "-f", doc)
	k.Ops()
	r := step(0, "status")
	if !strings.Contains(r.stdout, "Health") || !strings.Contains(r.stdout, "unchecked: no daemon: checks run in ipvsctl serve") {
		t.Errorf("status:\n%s", r.stdout)
	}
	r = step(0, "health")
	if !strings.Contains(r.stdout, "web      r1      198.18.0.11:80  http   unchecked") {
		t.Errorf("health:\n%s", r.stdout)
	}
	step(0, "rs", "set", "web", "r1", "--health", "down")
	if diff := cmp.Diff([]string{"ipvsadm -d -t 198.18.0.100:80 -r 198.18.0.11:80"}, k.Ops()); diff != "" {
		t.Errorf("forced down (-want +got):\n%s", diff)
	}
	r = step(0, "health", "web", "r1", "--json")
	if !strings.Contains(r.stdout, `"phase": "forced down"`) {
		t.Errorf("health --json:\n%s", r.stdout)
	}
	r = step(2, "rs", "set", "web", "r1", "--health", "sideways")
	if !strings.Contains(r.stderr, `services[0].servers[0].health: "sideways" is not a forced health`) {
		t.Errorf("bad --health: %s", r.stderr)
	}
	step(0, "rs", "set", "web", "r1", "--health", "auto")
	if diff := cmp.Diff([]string{"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 3"}, k.Ops()); diff != "" {
		t.Errorf("auto again (-want +got):\n%s", diff)
	}
	step(2, "health", "nope")
	step(2, "health", "web", "--check")
}
