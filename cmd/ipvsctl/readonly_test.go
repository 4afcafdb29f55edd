package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

// Without a daemon, the read verbs work on a read-only filesystem (a
// read-only bind mount of the state directory), as in an incident; a write
// is refused there with the reason.
func TestReadVerbsOnAReadOnlyDatabase(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Need(t, "needs root to bind-mount the state directory read-only")
	}
	k := fakekernel.New()
	src, ro := t.TempDir(), t.TempDir()
	db := filepath.Join(src, "ipvsctl.db")
	if r := runCLI(t, k, "--db", db, "apply", "-f", writeDoc(t, webDoc)); r.code != 0 {
		t.Fatalf("apply: %+v", r)
	}
	for _, args := range [][]string{{"--bind", src, ro}, {"-o", "remount,bind,ro", ro}} {
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			t.Fatalf("mount %v: %v\n%s", args, err, out)
		}
	}
	t.Cleanup(func() { _ = syscall.Unmount(ro, syscall.MNT_DETACH) })
	rdb := filepath.Join(ro, "ipvsctl.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"history"}, "apply"},
		{[]string{"history", "1"}, "+ service web"},
		{[]string{"export", "--format", "ipvsadm"}, "-A -t 198.18.0.100:80 -s wrr"},
		{[]string{"status"}, "198.18.0.100:80"},
		{[]string{"diff"}, "kernel matches"},
		{[]string{"why", "web", "198.18.0.11"}, "198.18.0.11"},
	} {
		r := runCLI(t, k, append([]string{"--db", rdb}, c.args...)...)
		if r.code != 0 || !strings.Contains(r.stdout, c.want) {
			t.Errorf("ipvsctl %s on a read-only database: exit %d, want %q in\n%s%s", strings.Join(c.args, " "), r.code, c.want, r.stdout, r.stderr)
		}
	}
	if r := runCLI(t, k, "--db", rdb, "vs", "add", "api", "--address", "198.18.0.101", "--port", "80"); r.code == 0 {
		t.Errorf("a write on a read-only database succeeded: %+v", r)
	}
}
