package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// TestLoadtestMarks: loadtest start and end mark a run through the daemon's
// API and core (with --server, and on the director through its socket),
// list shows the run with its figures, each mark is audited, and bad
// input is refused naming the field and the value, with nothing stored.
func TestLoadtestMarks(t *testing.T) {
	g := servertest.Start(t)
	remote := map[string]string{"USER": "alice", "IPVSCTL_SERVER": g.URL, "IPVSCTL_TOKEN": g.Tokens[auth.Admin]}
	if r := runWith(t, remote, "apply", "-f", writeDoc(t, webDoc)); r.code != 0 {
		t.Fatalf("apply: %d %s", r.code, r.stderr)
	}
	local := map[string]string{"USER": "alice", "IPVSCTL_DB": g.DB}
	r := runWith(t, remote, "loadtest", "start", "--test", "t1", "--phase", "default", "--service", "web", "--tool", "wrk -c64")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "1" {
		t.Fatalf("loadtest start: %+v", r)
	}
	if r := runWith(t, local, "loadtest", "end", "1", "--rps", "850.5", "--p50", "60ms", "--p99", "1.2s", "--cpu", "93", "--softirq", "21",
		"--entries", "1019", "--buckets", "8192", "--errors", "Socket errors: connect 0, read 3"); r.code != 0 {
		t.Fatalf("loadtest end on the director: %+v", r)
	}
	if r := runWith(t, local, "loadtest", "start", "--test", "t1", "--phase", "tuned", "--web-phase", "tuned", "--service", "tcp:198.18.0.100:80"); r.code != 0 || strings.TrimSpace(r.stdout) != "2" {
		t.Fatalf("loadtest start, by the service's key: %+v", r)
	}
	for _, c := range []struct {
		env  map[string]string
		args []string
		code int
		want string
	}{
		{remote, []string{"loadtest", "start", "--test", "t1", "--phase", "fast", "--service", "web"}, 2, `phase: "fast" is not default or tuned`},
		{remote, []string{"loadtest", "start", "--test", "", "--phase", "tuned", "--service", "web"}, 2, `test: ""`},
		{remote, []string{"loadtest", "start", "--test", "t1", "--phase", "tuned", "--web-phase", "nginx", "--service", "web"}, 2, `web_phase: "nginx" is not default or tuned`},
		{remote, []string{"loadtest", "start", "--test", "t1", "--phase", "tuned", "--service", "nope"}, 2, `service: "nope" is not a virtual service`},
		{remote, []string{"loadtest", "end", "1", "--rps", "10"}, 2, "load run 1: not started, or ended already"},
		{remote, []string{"loadtest", "end", "2", "--rps", "10", "--cpu", "150"}, 2, "cpu: 1.5 is not between 0 and 1"},
		{remote, []string{"loadtest", "end", "2", "--p99", "slow"}, 2, `--p99: "slow" is not a duration`},
		{remote, []string{"loadtest", "end", "x"}, 2, `ID: "x" is not a load run's number`},
		{remote, []string{"loadtest", "frobnicate"}, 2, `unknown verb "frobnicate"`},
		{map[string]string{"USER": "alice", "IPVSCTL_SERVER": g.URL, "IPVSCTL_TOKEN": g.Tokens[auth.Operator]},
			[]string{"loadtest", "start", "--test", "t1", "--phase", "tuned", "--service", "web"}, 1, "admin"},
	} {
		r := runWith(t, c.env, c.args...)
		if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.want) {
			t.Errorf("ipvsctl %s: %d %s%s, want %d %q", strings.Join(c.args, " "), r.code, r.stdout, r.stderr, c.code, c.want)
		}
	}
	r = runWith(t, remote, "loadtest", "list", "--json")
	var runs []server.LoadRun
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &runs) != nil || len(runs) != 2 {
		t.Fatalf("loadtest list --json: %+v", r)
	}
	if x := runs[0].Result; runs[0].Phase != "default" || runs[0].WebPhase != "" || runs[0].Tool != "wrk -c64" || runs[0].EndedAt == nil || x == nil || x.RPS != 850.5 ||
		x.P50ms != 60 || x.P99ms != 1200 || x.CPU != 0.93 || x.Entries != 1019 || x.Buckets != 8192 || !strings.Contains(x.Errors, "read 3") {
		t.Errorf("the ended run: %+v %+v", runs[0], runs[0].Result)
	}
	if runs[1].Phase != "tuned" || runs[1].WebPhase != "tuned" || runs[1].EndedAt != nil || runs[1].Result != nil || runs[1].Service != "web" {
		t.Errorf("the run still going: %+v", runs[1])
	}
	if l := runWith(t, local, "loadtest", "list"); l.code != 0 || !strings.Contains(l.stdout, "850    60.0 ms  1200.0 ms  93%  21%      1019 / 8192") ||
		!regexp.MustCompile(`(?m)^1 +t1 +default +- +web `).MatchString(l.stdout) || !regexp.MustCompile(`(?m)^2 +t1 +tuned +tuned +web `).MatchString(l.stdout) {
		t.Errorf("loadtest list on the director:\n%s%s", l.stdout, l.stderr)
	}
	for action, n := range map[string]int{"loadtest start": 2, "loadtest end": 1} {
		es, err := g.Store.Audit(context.Background(), store.AuditFilter{Action: action})
		ok := 0
		for _, e := range es {
			if e.Outcome == store.OutcomeSuccess {
				ok++
			}
		}
		if err != nil || ok != n {
			t.Errorf("audit %q: %d successes in %+v, want %d (%v)", action, ok, es, n, err)
		}
	}
}
