package store

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// seeded is a database at dir/ipvsctl.db with three revisions, closed.
func seeded(t *testing.T, dir string) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(dir, "ipvsctl.db")
	st, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web", "api", "dns"} {
		if _, _, err := st.Update(ctx, "t", "cli", func(s *ipvsmgr.State, _ int64) (string, error) {
			s.Services = append(s.Services, ipvsmgr.Service{Name: name, Address: "198.18.0.100", Port: 80 + len(s.Services), Servers: []ipvsmgr.Server{}})
			return "vs add " + name, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// readsAll reads what the read verbs read through a read-only open.
func readsAll(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	st, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	defer st.Close()
	cur, rev, err := st.Current(ctx)
	if err != nil || rev != 3 || len(cur.Services) != 3 {
		t.Fatalf("current: revision %d, %d services, %v", rev, len(cur.Services), err)
	}
	h, err := st.History(ctx, 10)
	if err != nil || len(h) != 3 {
		t.Fatalf("history: %d revisions, %v", len(h), err)
	}
	if _, err := st.Revision(ctx, 1); err != nil {
		t.Fatalf("revision 1: %v", err)
	}
}

func needMount(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Need(t, "needs root to mount a tmpfs")
	}
}

func mount(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func umountLater(t *testing.T, dir string) {
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// On a full filesystem Open fails (it would write); the read-only open
// reads the current state, the history and a revision.
func TestReadOnlyOpenOnAFullDisk(t *testing.T) {
	needMount(t)
	dir := t.TempDir()
	mount(t, "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir)
	umountLater(t, dir)
	path := seeded(t, dir)
	fill, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := fill.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	fill.Close()
	readsAll(t, path)
	if st, err := Open(context.Background(), path); err == nil {
		// Open only reads an up-to-date database; a write must fail.
		_, _, err = st.Update(context.Background(), "t", "cli", func(s *ipvsmgr.State, _ int64) (string, error) {
			s.Settings.TCPTimeout = 900
			return "settings", nil
		})
		st.Close()
		if !errors.Is(err, ErrDiskFull) {
			t.Fatalf("a write on a full disk: %v, want ErrDiskFull", err)
		}
	}
}

// On a read-only bind mount, with and without the WAL index beside the
// database, the read-only open reads everything; Open cannot.
func TestReadOnlyOpenOnAReadOnlyFilesystem(t *testing.T) {
	needMount(t)
	src, ro := t.TempDir(), t.TempDir()
	path := seeded(t, src)
	mount(t, "--bind", src, ro)
	umountLater(t, ro)
	mount(t, "-o", "remount,bind,ro", ro)
	rpath := filepath.Join(ro, filepath.Base(path))
	if _, err := os.Stat(rpath + "-shm"); err == nil {
		t.Logf("the WAL index is there")
	}
	readsAll(t, rpath)
	if st, err := Open(context.Background(), rpath); err == nil {
		st.Close()
		t.Fatal("Open succeeded on a read-only filesystem: the test does not test it")
	}
	// The -shm and -wal gone (a clean shutdown's state on a copied image): still readable.
	if err := syscall.Unmount(ro, syscall.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	os.Remove(path + "-shm")
	os.Remove(path + "-wal")
	mount(t, "--bind", src, ro)
	mount(t, "-o", "remount,bind,ro", ro)
	readsAll(t, rpath)
}

// An older schema is refused by name, never upgraded by a read.
func TestReadOnlyOpenRefusesAnOlderSchema(t *testing.T) {
	path := seeded(t, t.TempDir())
	st, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.db.Exec(`DELETE FROM schema_migrations WHERE version = (SELECT MAX(version) FROM schema_migrations)`); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := OpenReadOnly(context.Background(), path); !errors.Is(err, ErrSchemaBehind) || !strings.Contains(err.Error(), path) {
		t.Fatalf("older schema: %v", err)
	}
}
