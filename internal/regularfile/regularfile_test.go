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
