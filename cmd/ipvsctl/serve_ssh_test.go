package main

import (
	"flag"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// serve's --ssh-* flags: a key at the default place turns verifying on; its
// absence leaves it off, saying which flag turns it on; a key named with
// --ssh-identity must load, or serve does not start.
func TestServeSSHFlags(t *testing.T) {
	home := t.TempDir()
	config := func(args ...string) (string, int, error) {
		t.Helper()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		var f serveSSHFlags
		f.register(fs, home)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		rs, err := f.config(fs, slog.New(slog.NewTextHandler(io.Discard, nil)))
		return rs.Unavailable, len(rs.Signers), err
	}
	why, n, err := config()
	if err != nil || n != 0 || !strings.Contains(why, "--ssh-identity FILE") || !strings.Contains(why, filepath.Join(home, ".ssh", "id_ed25519")) {
		t.Errorf("no key at the default place: %q, %d signers, err %v", why, n, err)
	}
	if why, _, err = config("--ssh-identity", ""); err != nil || !strings.Contains(why, "off") {
		t.Errorf(`--ssh-identity "": %q, err %v`, why, err)
	}
	if _, _, err = config("--ssh-identity", filepath.Join(home, "missing")); err == nil || !strings.Contains(err.Error(), "ssh-identity: read ssh identity") {
		t.Errorf("a named key that is missing: err %v", err)
	}
	if _, _, err = config("--ssh-sudo", "sometimes"); err == nil || !strings.Contains(err.Error(), "ssh-sudo") {
		t.Errorf("a bad --ssh-sudo: err %v", err)
	}
	writeIdentity(t, home)
	if why, n, err = config(); err != nil || n != 1 || why != "" {
		t.Errorf("a key at the default place: %q, %d signers, err %v", why, n, err)
	}
}
