package main

import (
	"encoding/json"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/arpguard"
)

// TestRealserverTuneCLI: an unreachable real server is reported and fails
// the verb; bad flags are usage errors naming the value. (The SSH work
// itself is tested against sshd in arpguard's TestSSHTunePushCheckUndo.)
func TestRealserverTuneCLI(t *testing.T) {
	home := t.TempDir()
	writeIdentity(t, home)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	for _, verb := range []string{"check", "push", "undo"} {
		r := runRealserverCLI(t, home, "tune", verb, "--db", db, "--rip", "127.0.0.1", "--ssh-port", strconv.Itoa(port), "--json")
		var rs []arpguard.TuneResult
		if r.code != exitFail || json.Unmarshal([]byte(r.stdout), &rs) != nil || len(rs) != 1 || rs[0].State != arpguard.StateUnreachable ||
			rs[0].Action != "tune "+verb {
			t.Errorf("tune %s of a closed port: exit %d, %s %s", verb, r.code, r.stdout, r.stderr)
		}
	}
	r := runRealserverCLI(t, home, "tune", "check", "--db", db, "--rip", "127.0.0.1", "--ssh-port", strconv.Itoa(port))
	if r.code != exitFail || !strings.Contains(r.stdout, "127.0.0.1:"+strconv.Itoa(port)+"): unreachable: ") || !strings.Contains(r.stdout, "connection refused") {
		t.Errorf("tune check's text: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, bad := range [][]string{
		{"tune", "check", "--rip", "127.0.0.1", "--port", "70000"},
		{"tune", "check", "--rip", "not-an-address"},
		{"tune", "check", "--rip", "127.0.0.1", "--server", "https://198.18.0.1:3636"},
		{"tune", "frobnicate"},
	} {
		if r := runRealserverCLI(t, home, bad...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", bad, r.code, exitUsage, r.stderr)
		}
	}
	if r := runRealserverCLI(t, home, "tune", "check", "--rip", "127.0.0.1", "--port", "70000"); !strings.Contains(r.stderr, `"70000"`) {
		t.Errorf("a bad port is named: %s", r.stderr)
	}
}
