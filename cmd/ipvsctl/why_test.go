package main

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// ipvsctl why, the API's .../why and the panel's page are one read: for each
// real server (drained, disabled, fine) the CLI's checks, reasons and words
// are the panel's, in the same order.
func TestWhyCLIAndPanelAgree(t *testing.T) {
	g := servertest.Start(t)
	ctx := context.Background()
	doc := `{"services":[{"name":"web","address":"198.18.0.100","port":80,"interface":"eth0","scheduler":"wrr",
 "servers":[{"name":"r1","address":"198.18.0.11","weight":3,"drained":true},{"name":"r2","address":"198.18.0.12","enabled":false},
  {"name":"r3","address":"198.18.0.13","upper_threshold":50}]}]}`
	if _, err := g.Core.Apply(ctx, server.Actor{Name: "seed", Via: "cli"}, strings.NewReader(doc), "seed", server.WriteOptions{NoWait: true}); err != nil {
		t.Fatal(err)
	}
	viewer := g.PanelLogin(t, "viewer")
	item := regexp.MustCompile(`(?s)<li data-reason="([a-z_]+)"[^>]*>.*?<strong>([^<]*)</strong>: (.*?)</li>`)
	for _, sid := range []string{"r1", "r2", "r3"} {
		var out, errb bytes.Buffer
		env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string {
			return map[string]string{"USER": "carol", "IPVSCTL_DB": g.DB}[k]
		}}
		if code := dispatch(env, []string{"why", "web", sid, "--json"}); code != 0 {
			t.Fatalf("ipvsctl why web %s: %d %s", sid, code, errb.String())
		}
		var why server.Why
		if err := json.Unmarshal(out.Bytes(), &why); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		resp, body := g.Panel(t, viewer, "GET", "/services/web/servers/"+sid+"/why", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("panel why %s: %s", sid, resp.Status)
		}
		got := item.FindAllStringSubmatch(body, -1)
		if len(got) != len(why.Checks) || len(got) < 8 {
			t.Fatalf("%s: the CLI lists %d checks, the panel %d:\n%s", sid, len(why.Checks), len(got), body)
		}
		for i, c := range why.Checks {
			if string(c.Reason) != got[i][1] || c.Check.Title() != got[i][2] || c.Detail != html.UnescapeString(got[i][3]) {
				t.Errorf("%s check %d: CLI %s %q %q, panel %s %q %q", sid, i, c.Reason, c.Check.Title(), c.Detail, got[i][1], got[i][2], got[i][3])
			}
		}
		if !strings.Contains(body, html.EscapeString(why.Verdict)) {
			t.Errorf("%s: the panel's verdict is not the CLI's %q", sid, why.Verdict)
		}
		// The API's answer is the same read, for a viewer.
		resp, apiBody := g.API(t, auth.Viewer, "GET", "/api/v1/services/web/servers/"+sid+"/why", "")
		var api server.Why
		if resp.StatusCode != 200 || json.Unmarshal([]byte(apiBody), &api) != nil || len(api.Checks) != len(why.Checks) || api.Blocking != why.Blocking {
			t.Errorf("API why %s: %s %s", sid, resp.Status, apiBody)
		}
		reasons := map[server.WhyReason]bool{}
		for _, c := range why.Checks {
			reasons[c.Reason] = true
		}
		want := map[string]server.WhyReason{"r1": server.ReasonDrained, "r2": server.ReasonServerDisabled, "r3": server.ReasonOK}[sid]
		if !reasons[want] || (sid == "r3") != (why.Blocking == 0) {
			t.Errorf("%s: reasons %v, %d blocking; want %s", sid, reasons, why.Blocking, want)
		}
	}
}

// Settings have a verb of their own in the CLI and the API, audited as "settings".
func TestSettingsVerb(t *testing.T) {
	g := servertest.Start(t)
	cli := localCLI(g.DB, "carol")
	if out, code := cli("settings", "set", "--tcp-timeout", "900", "--network", "nat"); code != 0 {
		t.Fatalf("settings set: %d %s", code, out)
	}
	if out, code := cli("settings", "set", "--network", "bogus"); code != exitUsage || !strings.Contains(out, "settings.network") {
		t.Fatalf("settings set --network bogus: %d %s", code, out)
	}
	if resp, body := g.API(t, auth.Operator, "PATCH", "/api/v1/settings", `{"udp_timeout":30}`); resp.StatusCode != 403 {
		t.Fatalf("an operator changed the settings: %s %s", resp.Status, body)
	}
	if resp, body := g.API(t, auth.Admin, "PATCH", "/api/v1/settings", `{"udp_timeout":30}`); resp.StatusCode != 200 {
		t.Fatalf("PATCH /settings: %s %s", resp.Status, body)
	}
	out, code := cli("settings", "show", "--json")
	var s struct {
		Network    string `json:"network"`
		TCPTimeout int    `json:"tcp_timeout"`
		UDPTimeout int    `json:"udp_timeout"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s.Network != "nat" || s.TCPTimeout != 900 || s.UDPTimeout != 30 {
		t.Fatalf("settings show: %d %s", code, out)
	}
	if out, _ := cli("audit", "--action", "settings"); strings.Count(out, "settings") < 3 {
		t.Fatalf("audit: %s", out)
	}
}
