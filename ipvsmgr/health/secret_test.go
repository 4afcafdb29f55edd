package health

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// A password file that anyone may read, a FIFO in its place or a missing
// one is the director's fault, found without blocking and without talking
// to the real server: the check counts neither way.
func TestNegotiatePasswordFileFaults(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open.pw")
	if err := os.WriteFile(open, []byte("pw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.pw")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.pw")
	if err := os.WriteFile(good, []byte("right-pw\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := readSecret(good); err != nil || got != "right-pw" {
		t.Errorf("readSecret(good) = %q, %v; want right-pw (the line end dropped)", got, err)
	}
	var c Checker
	for _, tc := range []struct{ file, want string }{
		{open, "mode 0644 lets its group or others at it"},
		{fifo, "not a regular file (it is a FIFO)"},
		{filepath.Join(dir, "missing.pw"), "no such file"},
	} {
		for _, typ := range ipvsmgr.NegotiateTypes() {
			spec := ipvsmgr.CheckSpec{Type: typ, Target: netip.MustParseAddrPort("127.0.0.1:1"), Timeout: time.Second,
				Login: "mon", PasswordFile: tc.file, SecretFile: good}
			if typ == "radius" {
				spec.SecretFile, spec.PasswordFile = tc.file, good
			}
			if typ == "sip" {
				continue // no password: OPTIONS asks none
			}
			r := c.Run(context.Background(), &spec)
			if r.Outcome != Fault || !strings.Contains(r.Reason, tc.want) {
				t.Errorf("%s with %s: %s %q, want a fault with %q", typ, filepath.Base(tc.file), r.Outcome, r.Reason, tc.want)
			}
		}
	}
}
