package httpd_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// TestOnePolicy walks server.Policy: for each write the API and the panel
// both offer, each role is refused (403) by both exactly when the table says
// it is below the action's role, and the core refuses the same actor
// itself, with the same code.
func TestOnePolicy(t *testing.T) {
	g := servertest.Start(t)
	ctx := context.Background()
	type entry struct {
		action                   string
		apiMethod, apiPath, body string
		panelPath                string
		form                     url.Values
		edit                     server.Edit
	}
	entries := []entry{
		{"vs add", "POST", "/api/v1/services", `{"name":"x","address":"198.18.0.9","port":80}`, "/services",
			url.Values{"name": {"x"}, "kind": {"port"}, "address": {"198.18.0.9"}, "port": {"80"}}, server.AddServiceEdit(ipvsmgr.Service{Name: "x", Address: "198.18.0.9", Port: 80})},
		{"vs disable", "POST", "/api/v1/services/web/disable", "", "/services/web/disable", nil, server.ServiceEnabledEdit("web", false)},
		{"vs enable", "POST", "/api/v1/services/web/enable", "", "/services/web/enable", nil, server.ServiceEnabledEdit("web", true)},
		{"rs drain", "POST", "/api/v1/services/web/servers/r1/drain", "", "/services/web/servers/r1/drain", nil, server.DrainServerEdit("web", "r1")},
		{"rs enable", "POST", "/api/v1/services/web/servers/r1/enable", "", "/services/web/servers/r1/enable", nil, server.ServerEnabledEdit("web", "r1", true)},
		{"rs disable", "POST", "/api/v1/services/web/servers/r2/disable", "", "/services/web/servers/r2/disable", nil, server.ServerEnabledEdit("web", "r2", false)},
		{"rs rm", "DELETE", "/api/v1/services/web/servers/nope", "", "/services/web/servers/nope/delete", nil, server.RemoveServerEdit("web", "nope")},
		{"rs set", "PATCH", "/api/v1/services/web/servers/r1", `{"weight":4}`, "/services/web/servers/r1",
			url.Values{"weight": {"4"}}, server.PatchServerEdit("web", "r1", server.ServerPatch{Weight: ptr(4)})},
		{"rollback", "POST", "/api/v1/rollback/1", "", "/history/1/rollback", nil, server.Edit{}},
	}
	if _, err := g.Core.Apply(ctx, server.Actor{Name: "seed", Via: "cli"}, strings.NewReader(webDoc), "seed", server.WriteOptions{NoWait: true}); err != nil {
		t.Fatal(err)
	}
	cookies := map[auth.Role]*http.Cookie{}
	for _, role := range []auth.Role{auth.Viewer, auth.Operator, auth.Admin} {
		cookies[role] = g.PanelLogin(t, role.String())
	}
	for _, e := range entries {
		need := server.RoleFor(e.action)
		if e.edit.Action != "" && (e.edit.Action != e.action || e.edit.Role != need) {
			t.Errorf("%s: the core's edit is %q needing %s", e.action, e.edit.Action, e.edit.Role)
		}
		for _, role := range []auth.Role{auth.Viewer, auth.Operator, auth.Admin} {
			refused := !auth.Allows(role, need)
			resp, body := g.API(t, role, e.apiMethod, e.apiPath, e.body)
			if (resp.StatusCode == http.StatusForbidden) != refused {
				t.Errorf("API %s %s as %s: %s (the table: %s needs %s) %s", e.apiMethod, e.apiPath, role, resp.Status, e.action, need, body)
			}
			resp, _ = g.Panel(t, cookies[role], "POST", e.panelPath, e.form)
			if (resp.StatusCode == http.StatusForbidden) != refused {
				t.Errorf("panel POST %s as %s: %s (the table: %s needs %s)", e.panelPath, role, resp.Status, e.action, need)
			}
			if e.edit.Action == "" {
				continue
			}
			_, err := g.Core.Write(ctx, server.Actor{Name: role.String(), Via: "test", Role: role}, server.WriteOptions{NoApply: true}, e.edit)
			if (server.CodeOf(err) == server.CodeForbidden) != refused {
				t.Errorf("core %s as %s: %v (the table: %s)", e.action, role, err, need)
			}
		}
	}
	// An operator may change only server.OperatorServerFields.
	resp, _ := g.API(t, auth.Operator, "PATCH", "/api/v1/services/web/servers/r1", `{"address":"198.18.0.99"}`)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("an operator changed a server's address through the API: %s", resp.Status)
	}
	if _, err := g.Core.Write(ctx, server.Actor{Name: "operator", Via: "test", Role: auth.Operator}, server.WriteOptions{NoApply: true},
		server.PatchServerEdit("web", "r1", server.ServerPatch{Name: ptr("evil")})); server.CodeOf(err) != server.CodeForbidden {
		t.Errorf("an operator renamed a server in the core: %v", err)
	}
}

// TestOneStatusMapping walks the code-to-status table: the API answers each
// code with its status, and the client reads each status back as its code.
func TestOneStatusMapping(t *testing.T) {
	primaries := map[int]server.Code{}
	for _, cs := range server.CodeStatuses() {
		if got := server.HTTPStatus(cs.Code); got != cs.Status {
			t.Errorf("%s: HTTPStatus %d, the table %d", cs.Code, got, cs.Status)
		}
		status, body := httpd.ErrorBodyOf(&server.Error{Code: cs.Code, Msg: "x"})
		if status != cs.Status || body.Code != cs.Code {
			t.Errorf("%s: the API answers %d %s, the table %d", cs.Code, status, body.Code, cs.Status)
		}
		if cs.Primary {
			if prev, dup := primaries[cs.Status]; dup {
				t.Errorf("status %d reads back as both %s and %s", cs.Status, prev, cs.Code)
			}
			primaries[cs.Status] = cs.Code
		}
	}
	for _, cs := range server.CodeStatuses() {
		if got := server.CodeOfStatus(cs.Status); got != primaries[cs.Status] || (cs.Primary && got != cs.Code) {
			t.Errorf("status %d reads back as %s (primary %s)", cs.Status, got, primaries[cs.Status])
		}
	}
	if server.HTTPStatus(server.CodeBackup) != http.StatusConflict || server.HTTPStatus(server.CodeMalformed) != http.StatusBadRequest {
		t.Error("backup is a conflict (409), malformed a bad request (400)")
	}
}

func ptr[T any](v T) *T { return &v }
