package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/ipvsmgrtest"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// With a daemon running real tcp checks of two loopback listeners,
// `ipvsctl status` says the director is ready and when each server was
// checked, --json carries the checker, `why` says when the check last ran,
// and /readyz answers 200 through the daemon's HTTP server.
func TestStatusShowsTheCheckerAndEachCheckAge(t *testing.T) {
	g := servertest.Start(t)
	var servers []string
	for i := range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		ipvsmgrtest.AcceptAndClose(ln)
		servers = append(servers, fmt.Sprintf(`{"name":"r%d","address":"127.0.0.1","port":%d}`, i+1, ln.Addr().(*net.TCPAddr).Port))
	}
	doc := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(doc, []byte(`{"services":[{"name":"web","address":"198.18.0.100","port":80,"forwarding":"nat",
	 "check":{"type":"tcp","interval":0.2,"timeout":0.5,"warmup":0,"rise":1,"fall":1},
	 "servers":[`+strings.Join(servers, ",")+`]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) cliRun {
		var out, errb bytes.Buffer
		env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string {
			return map[string]string{"USER": "alice", "IPVSCTL_SERVER": g.URL, "IPVSCTL_TOKEN": g.Tokens[auth.Admin]}[k]
		}}
		return cliRun{dispatch(env, args), out.String(), errb.String()}
	}
	if r := run("apply", "-f", doc); r.code != 0 {
		t.Fatalf("apply: %+v", r)
	}
	var v server.StatusView
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := run("status", "--json")
		if r.code != 0 {
			t.Fatalf("status --json: %+v", r)
		}
		v = server.StatusView{}
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatal(err)
		}
		if v.Checker != nil && v.Checker.Ready && v.Checker.Checks == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready within 20 s: %+v", v.Checker)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c := v.Checker; c.NotRun != 0 || c.Distinct != 2 || c.ReadyAt == nil {
		t.Errorf("the checker in status --json: %+v", c)
	}
	for _, s := range v.Services[0].Servers {
		if h := s.Health; h == nil || h.LastCheck == nil || h.LastCheckAge == nil || *h.LastCheckAge < 0 {
			t.Errorf("%s:%d in status --json: %+v", s.Address, s.Port, s.Health)
		}
	}
	r := run("status")
	if r.code != 0 {
		t.Fatalf("status: %+v", r)
	}
	if !regexp.MustCompile(`(?m)^Checks: ready \(2 checks, 2 distinct, oldest result \S+ ago\); runs start (on time \(99% within 1ms\)|\S+ late at the median, \S+ at p99)$`).MatchString(r.stdout) {
		t.Errorf("status has no Checks line saying ready:\n%s", r.stdout)
	}
	if n := len(regexp.MustCompile(`up \S+: [^,]+, checked \S+ ago`).FindAllString(r.stdout, -1)); n != 2 {
		t.Errorf("status shows %d servers with their check's age, want 2:\n%s", n, r.stdout)
	}
	if r := run("why", "web", "r1"); r.code != 0 || !strings.Contains(r.stdout, "last checked ") {
		t.Errorf("why web r1: %+v", r)
	}
	resp, err := http.Get(g.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rz server.CheckerStatus
	if err := json.NewDecoder(resp.Body).Decode(&rz); err != nil || resp.StatusCode != http.StatusOK || !rz.Ready || rz.Checks != 2 {
		t.Errorf("/readyz: %d %+v %v", resp.StatusCode, rz, err)
	}
}
