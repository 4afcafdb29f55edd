package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// localCLI runs the CLI as user on the database at db (no daemon), its
// output and errors in one string, with its exit status.
func localCLI(db, user string) func(args ...string) (string, int) {
	return func(args ...string) (string, int) {
		var out, errb bytes.Buffer
		env := &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string {
			return map[string]string{"USER": user, "IPVSCTL_DB": db}[k]
		}}
		code := dispatch(env, args)
		return out.String() + errb.String(), code
	}
}

// settings.maintenance_dir is set and cleared by the CLI's flag and the
// API's PATCH, each refusing a path that is not clean and absolute with
// the field and the value.
func TestSettingsMaintenanceDir(t *testing.T) {
	g := servertest.Start(t)
	cli := localCLI(g.DB, "carol")
	dir := func() string {
		t.Helper()
		out, code := cli("settings", "show", "--json")
		var s struct {
			MaintenanceDir *string `json:"maintenance_dir"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
			t.Fatalf("settings show: %d %s", code, out)
		}
		if s.MaintenanceDir == nil {
			return "(none)"
		}
		return *s.MaintenanceDir
	}
	if out, code := cli("settings", "set", "--maintenance-dir", "/etc/ha.d/maintenance"); code != 0 {
		t.Fatalf("settings set --maintenance-dir: %d %s", code, out)
	}
	if got := dir(); got != "/etc/ha.d/maintenance" {
		t.Fatalf("maintenance_dir %q after the CLI set it", got)
	}
	if out, _ := cli("settings", "show"); !strings.Contains(out, "maintenance_dir        /etc/ha.d/maintenance") {
		t.Errorf("settings show:\n%s", out)
	}
	for _, bad := range []string{"maintenance", "/etc/ha.d/../maintenance"} {
		out, code := cli("settings", "set", "--maintenance-dir", bad)
		if want := `settings.maintenance_dir: "` + bad + `" is not a clean absolute path`; code != exitUsage || !strings.Contains(out, want) {
			t.Errorf("settings set --maintenance-dir %s: %d %s, want exit 2 and %q", bad, code, out, want)
		}
	}
	if out, code := cli("settings", "set", "--maintenance-dir="); code != 0 || dir() != "(none)" {
		t.Fatalf("settings set --maintenance-dir= (clear): %d %s, maintenance_dir %q", code, out, dir())
	}

	resp, body := g.API(t, auth.Admin, "PATCH", "/api/v1/settings", `{"maintenance_dir":"relative/dir"}`)
	var e struct {
		Fields []struct{ Path, Message string }
	}
	if resp.StatusCode != 422 || json.Unmarshal([]byte(body), &e) != nil || len(e.Fields) != 1 ||
		e.Fields[0].Path != "settings.maintenance_dir" || !strings.Contains(e.Fields[0].Message, `"relative/dir" is not a clean absolute path`) {
		t.Fatalf("PATCH a relative maintenance_dir: %s %s", resp.Status, body)
	}
	if resp, body := g.API(t, auth.Admin, "PATCH", "/api/v1/settings", `{"maintenance_dir":"/var/lib/ipvsctl/maintenance"}`); resp.StatusCode != 200 {
		t.Fatalf("PATCH maintenance_dir: %s %s", resp.Status, body)
	}
	if got := dir(); got != "/var/lib/ipvsctl/maintenance" {
		t.Fatalf("maintenance_dir %q after the API set it", got)
	}
	// Another setting's patch leaves it; "" clears it.
	if resp, body := g.API(t, auth.Admin, "PATCH", "/api/v1/settings", `{"udp_timeout":30}`); resp.StatusCode != 200 || dir() != "/var/lib/ipvsctl/maintenance" {
		t.Fatalf("PATCH udp_timeout: %s %s, maintenance_dir %q", resp.Status, body, dir())
	}
	if resp, body := g.API(t, auth.Admin, "PATCH", "/api/v1/settings", `{"maintenance_dir":""}`); resp.StatusCode != 200 || dir() != "(none)" {
		t.Fatalf("PATCH maintenance_dir \"\": %s %s, maintenance_dir %q", resp.Status, body, dir())
	}
}
