package regularfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO with no writer (whose plain open blocks forever) is refused at
// once, as are a directory and a socket; a regular file opens.
func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	f, err := Open(fifo, 0)
	t.Logf("a FIFO refused in %s", time.Since(start))
	if f != nil || !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), fifo) || !strings.Contains(err.Error(), "FIFO") {
		t.Fatalf("Open(FIFO) = %v, %v; want an error naming the path and FIFO", f, err)
	}
	if _, err := Open(dir, 0); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "directory") {
		t.Errorf("Open(directory) = %v", err)
	}
	f, err = Open(plain, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8)
	n, _ := f.Read(b)
	f.Close()
	if string(b[:n]) != "7\n" {
		t.Errorf("read %q", b[:n])
	}
	if _, err := Open(filepath.Join(dir, "missing"), 0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open(missing) = %v, want ErrNotExist", err)
	}
}

// A secret file is read once, its line end dropped; one others may read,
// one with two lines, an empty one and a FIFO are refused, naming the file.
func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if s, err := ReadSecret(write("tok", "ipvsctl_0123abcd_secret\n", 0o600)); err != nil || s != "ipvsctl_0123abcd_secret" {
		t.Errorf("ReadSecret = %q, %v", s, err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{write("open", "ipvsctl_x\n", 0o644), "mode 0644 lets its group or others at it"},
		{write("two", "a\nb\n", 0o600), "more than one line"},
		{write("empty", "\n", 0o600), "empty"},
		{fifo, "not a regular file"},
	} {
		if _, err := ReadSecret(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("ReadSecret(%s) = %v, want %q naming the file", tc.path, err, tc.want)
		}
	}
}
