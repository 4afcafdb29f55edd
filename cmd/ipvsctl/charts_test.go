package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// runWith runs a verb in-process with the environment vars.
func runWith(t *testing.T, vars map[string]string, args ...string) cliRun {
	t.Helper()
	var out, errb bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }}
	code := dispatch(env, args)
	return cliRun{code, out.String(), errb.String()}
}

// ipvsctl charts reads the same series through the API as from the
// director's database, and refuses what names nothing alike.
func TestChartsVerb(t *testing.T) {
	g := servertest.Start(t)
	remote := map[string]string{"USER": "alice", "IPVSCTL_SERVER": g.URL, "IPVSCTL_TOKEN": g.Tokens[auth.Admin]}
	if r := runWith(t, remote, "apply", "-f", writeDoc(t, webDoc)); r.code != 0 {
		t.Fatalf("apply: %d %s", r.code, r.stderr)
	}
	remote["IPVSCTL_TOKEN"] = g.Tokens[auth.Viewer] // the charts are a viewer's
	// On the director, through the daemon's socket beside its database.
	local := map[string]string{"USER": "alice", "IPVSCTL_DB": g.DB}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"charts", "web"}, 0, "# no points for s -t 198.18.0.100:80 over the last hour"},
		{[]string{"charts", "web", "198.18.0.11", "--range", "day", "--json"}, 0, `"key": "d -t 198.18.0.100:80 198.18.0.11:80"`},
		{[]string{"charts", "web", "--range", "week"}, 2, `range: "week" is not hour or day`},
		{[]string{"charts", "nope"}, 2, `no virtual service "nope"`},
		{[]string{"charts", "web", "r9"}, 2, `r9`},
		{[]string{"charts"}, 2, "want SERVICE [SERVER]"},
	} {
		r := runWith(t, remote, c.args...)
		if l := runWith(t, local, c.args...); normalize(l.stdout) != normalize(r.stdout) || l.stderr != r.stderr || l.code != r.code {
			t.Errorf("ipvsctl %s: on the director %+v, through the API %+v", strings.Join(c.args, " "), l, r)
		}
		if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.want) {
			t.Errorf("ipvsctl %s: %d %s%s, want %d %q", strings.Join(c.args, " "), r.code, r.stdout, r.stderr, c.code, c.want)
		}
		if c.code == 0 && strings.Contains(strings.Join(c.args, " "), "--json") {
			var cs server.ChartSeries
			if err := json.Unmarshal([]byte(r.stdout), &cs); err != nil || cs.Resolution != 60 || cs.Points == nil || cs.Server != "198.18.0.11" {
				t.Errorf("charts --json: %v %+v", err, cs)
			}
		}
	}
}
