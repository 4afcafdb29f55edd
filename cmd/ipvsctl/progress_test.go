package main

import (
	"bytes"
	"net/netip"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

// TestDrainProgress: waiting for a drain counts the connections down on one
// terminal line, cleared at the end; off a terminal, or with --json, nothing.
func TestDrainProgress(t *testing.T) {
	svc := ipvsmgr.ServiceKey{Family: syscall.AF_INET, Protocol: syscall.IPPROTO_TCP, Addr: netip.MustParseAddr("198.18.0.100"), Port: 80}
	dst := ipvsmgr.DestKey{Addr: netip.MustParseAddr("198.18.0.12"), Port: 80}
	for _, c := range []struct {
		name     string
		terminal bool
		extra    []string
		want     bool
	}{
		{"terminal", true, nil, true},
		{"not a terminal", false, nil, false},
		{"terminal with --json", true, []string{"--json"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := fakekernel.New()
			db := filepath.Join(t.TempDir(), "ipvsctl.db")
			if r := runCLI(t, k, "--db", db, "apply", "-f", writeDoc(t, webDoc)); r.code != 0 {
				t.Fatal(r.stderr)
			}
			k.SetActive(svc, dst, 3)
			go func() {
				time.Sleep(1500 * time.Millisecond)
				k.SetActive(svc, dst, 0)
			}()
			var out, errb bytes.Buffer
			env := &cliEnv{stdout: &out, stderr: &errb, kernel: k, getenv: func(string) string { return "" },
				terminal: func() bool { return c.terminal }}
			code := dispatch(env, append([]string{"--db", db, "rs", "rm", "web", "198.18.0.12"}, c.extra...))
			if code != 0 {
				t.Fatalf("rs rm: exit %d\n%s%s", code, out.String(), errb.String())
			}
			line := "\r\033[Kretiring 198.18.0.12:80 from -t 198.18.0.100:80: 3 active connections left"
			got := errb.String()
			if c.want && (!strings.Contains(got, line) || !strings.HasSuffix(strings.TrimSuffix(got, "stored revision 2\n"), "\r\033[K")) {
				t.Errorf("stderr %q, want %q then the line cleared", got, line)
			}
			if !c.want && strings.Contains(got, "retiring") {
				t.Errorf("progress shown: %q", got)
			}
		})
	}
}
