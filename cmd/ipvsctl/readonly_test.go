package main

import (
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

// Without a daemon, the read verbs work on a read-only filesystem (a
// read-only bind mount of the state directory), as in an incident; a write
// is refused there with the reason, and nothing stored is lost.
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
	stored := exported(t, k, db)
	mountOrFail(t, "--bind", src, ro)
	t.Cleanup(func() { _ = syscall.Unmount(ro, syscall.MNT_DETACH) })
	mountOrFail(t, "-o", "remount,bind,ro", ro)
	rdb := filepath.Join(ro, "ipvsctl.db")
	readVerbsWork(t, k, rdb)
	writeRefused(t, k, rdb, "read-only file system")
	if got := exported(t, k, rdb); got != stored {
		t.Errorf("the stored state changed on a read-only database:\n%s\nwant\n%s", got, stored)
	}
}

// A database an older ipvsctl left, on a read-only filesystem: a read verb
// would have to upgrade it, a write; it says so, and why that failed.
func TestReadVerbOnAnOlderReadOnlyDatabase(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Need(t, "needs root to bind-mount the state directory read-only")
	}
	k := fakekernel.New()
	src, ro := t.TempDir(), t.TempDir()
	db := filepath.Join(src, "ipvsctl.db")
	if r := runCLI(t, k, "--db", db, "apply", "-f", writeDoc(t, webDoc)); r.code != 0 {
		t.Fatalf("apply: %+v", r)
	}
	sdb, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdb.Exec(`DELETE FROM schema_migrations WHERE version = (SELECT MAX(version) FROM schema_migrations)`); err != nil {
		t.Fatal(err)
	}
	sdb.Close()
	mountOrFail(t, "--bind", src, ro)
	t.Cleanup(func() { _ = syscall.Unmount(ro, syscall.MNT_DETACH) })
	mountOrFail(t, "-o", "remount,bind,ro", ro)
	r := runCLI(t, k, "--db", filepath.Join(ro, "ipvsctl.db"), "history")
	if r.code != exitFail || !strings.Contains(r.stderr, "schema is older than this ipvsctl") || !strings.Contains(r.stderr, "read-only file system") {
		t.Errorf("history on an older read-only database: exit %d, want %d, the schema and the read-only filesystem named:\n%s%s",
			r.code, exitFail, r.stdout, r.stderr)
	}
}

// Without a daemon, the read verbs work on a full filesystem (a tmpfs
// filled to ENOSPC); a write fails naming the full disk, and nothing stored
// is lost: once there is space again the same write is stored.
func TestReadVerbsOnAFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Need(t, "needs root to mount a tmpfs")
	}
	k := fakekernel.New()
	dir := t.TempDir()
	mountOrFail(t, "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir)
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	db := filepath.Join(dir, "ipvsctl.db")
	if r := runCLI(t, k, "--db", db, "apply", "-f", writeDoc(t, webDoc)); r.code != 0 {
		t.Fatalf("apply: %+v", r)
	}
	stored := exported(t, k, db)
	fill := filepath.Join(dir, "fill")
	fillUp(t, fill)
	readVerbsWork(t, k, db)
	writeRefused(t, k, db, "filesystem is full")
	if r := runCLI(t, k, "--db", db, "vs", "add", "api", "--address", "198.18.0.101", "--port", "80"); strings.Contains(r.stderr, "schema") {
		t.Errorf("a write on a full disk names the schema, which was up to date: %s", r.stderr)
	}
	if got := exported(t, k, db); got != stored {
		t.Errorf("the stored state changed on a full disk:\n%s\nwant\n%s", got, stored)
	}
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, k, "--db", db, "vs", "add", "api", "--address", "198.18.0.101", "--port", "80"); r.code != 0 {
		t.Fatalf("the write once there is space again: %+v", r)
	}
	if got := exported(t, k, db); !strings.Contains(got, `"api"`) || !strings.Contains(got, `"web"`) {
		t.Errorf("the state after the write once there was space again:\n%s", got)
	}
}

// readVerbsWork runs history, export, status, diff and why over db.
func readVerbsWork(t *testing.T, k *fakekernel.Kernel, db string) {
	t.Helper()
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
		r := runCLI(t, k, append([]string{"--db", db}, c.args...)...)
		if r.code != 0 || !strings.Contains(r.stdout, c.want) {
			t.Errorf("ipvsctl %s: exit %d, want %q in\n%s%s", strings.Join(c.args, " "), r.code, c.want, r.stdout, r.stderr)
		}
	}
}

// writeRefused checks that a write fails with exit status 1 and an error
// that names why.
func writeRefused(t *testing.T, k *fakekernel.Kernel, db, why string) {
	t.Helper()
	r := runCLI(t, k, "--db", db, "vs", "add", "api", "--address", "198.18.0.101", "--port", "80")
	if r.code != exitFail || !strings.Contains(r.stderr, why) {
		t.Errorf("a write: exit %d, want %d and %q in the error:\n%s%s", r.code, exitFail, why, r.stdout, r.stderr)
	}
}

// exported is the stored desired state, as export prints it.
func exported(t *testing.T, k *fakekernel.Kernel, db string) string {
	t.Helper()
	r := runCLI(t, k, "--db", db, "export")
	if r.code != 0 {
		t.Fatalf("export: %+v", r)
	}
	return r.stdout
}

func mountOrFail(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// fillUp writes path until its filesystem is full.
func fillUp(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}
