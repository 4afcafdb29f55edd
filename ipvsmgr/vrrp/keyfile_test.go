package vrrp

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/internal/regularfile"
)

func TestReadKeyFile(t *testing.T) {
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
	hexKey := "hex:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n"
	if k, err := ReadKeyFile(write("hex", hexKey, 0o600)); err != nil || !bytes.Equal(k, kaKey()) {
		t.Errorf("hex key: %x %v", k, err)
	}
	text := strings.Repeat("s3cret-", 6) // 42 bytes
	if k, err := ReadKeyFile(write("text", text+"\r\n", 0o400)); err != nil || string(k) != text {
		t.Errorf("text key: %q %v", k, err)
	}
	for _, tc := range []struct {
		name, content string
		mode          os.FileMode
		want          string
	}{
		{"short", "too short\n", 0o600, "the key is 9 bytes long, not 32..64"},
		{"long", strings.Repeat("x", 65), 0o600, "the key is 65 bytes long"},
		{"huge", strings.Repeat("x", 500), 0o600, "longer than 140 bytes"},
		{"badhex", "hex:zz" + strings.Repeat("00", 32), 0o600, "after hex: encoding/hex: invalid byte"},
		{"open", text, 0o644, "mode 0644 lets its group or others at it (chmod 600)"},
	} {
		_, err := ReadKeyFile(write(tc.name, tc.content, tc.mode))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: %v, want ...%s... naming the file", tc.name, err, tc.want)
		}
	}
	if _, err := ReadKeyFile(filepath.Join(dir, "absent")); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("absent file: %v", err)
	}
}

// A key file that is a FIFO with no writer (a plain open of it blocks
// forever) is refused without blocking: the daemon's VRRP start never
// hangs on a key. The wait below only turns a hang into a failure.
func TestReadKeyFileRefusesAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "vrrp.key")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadKeyFile(fifo); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, regularfile.ErrNotRegular) || !strings.Contains(err.Error(), fifo) || !strings.Contains(err.Error(), "FIFO") {
			t.Fatalf("ReadKeyFile(FIFO) = %v, want not a regular file, naming it", err)
		}
	case <-time.After(5 * regularfile.Timeout):
		t.Fatal("ReadKeyFile of a FIFO is still blocked in open")
	}
}
