package httpd_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/formats"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// A keepalived file with what the report carries: two fixes keepalived
// makes with a warning (a DR port that differs, no scheduler), a kept key.
const kaReportDoc = `global_defs {
  router_id lb1
}
virtual_server 198.18.0.100 80 {
  lb_kind DR
  protocol TCP
  hysteresis 1
  real_server 198.18.0.11 8080 {
    weight 2
  }
  real_server 198.18.0.12 80 {
  }
}
`

// POST /api/v1/import answers with the report `ipvsctl import` prints (the
// same formats.Report, read the same way): the summary, the warnings with
// their lines, the ignored keywords; a refused file names its line; an
// import that would empty the state needs allow_empty.
func TestAPIImportReport(t *testing.T) {
	g := servertest.Start(t)
	setUp(t, g)
	admin := g.Tokens[auth.Admin]
	_, want, err := formats.ImportWith(formats.FormatKeepalived, strings.NewReader(kaReportDoc), formats.Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp, body := do(t, g, admin, "POST", "/api/v1/import?format=keepalived&name=lb1.conf&apply=false", kaReportDoc)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("import: %s %s", resp.Status, body)
	}
	var res struct {
		Revision int64 `json:"revision"`
		Report   struct {
			Summary  string         `json:"summary"`
			Services int            `json:"services"`
			Servers  int            `json:"servers"`
			Kept     int            `json:"kept"`
			Warnings []formats.Note `json:"warnings"`
			Ignored  []formats.Note `json:"ignored"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if res.Report.Summary != "1 virtual services, 2 real servers, 2 kept" || res.Report.Summary != want.Summary() ||
		res.Report.Services != 1 || res.Report.Servers != 2 || res.Report.Kept != 2 {
		t.Errorf("report %+v, the CLI's summary %q", res.Report, want.Summary())
	}
	if d := cmp.Diff(want.Warnings, res.Report.Warnings); d != "" || len(want.Warnings) != 2 || want.Warnings[1].Line != 8 {
		t.Errorf("warnings (-CLI +API):\n%s\nCLI: %+v", d, want.Warnings)
	}
	if !strings.Contains(body, `"message": "WARNING - virtual server 198.18.0.100:80 and real server 198.18.0.11:8080 ports don't match - resetting"`) {
		t.Errorf("the warning's text is not in the answer:\n%s", body)
	}

	// Refused at a line: 422, the line and the message in "refused".
	typo := strings.Replace(kaReportDoc, "weight 2", "weigth 2", 1)
	resp, body = do(t, g, admin, "POST", "/api/v1/import?format=keepalived", typo)
	var refusal struct {
		Error   string        `json:"error"`
		Code    string        `json:"code"`
		Refused *formats.Note `json:"refused"`
	}
	_ = json.Unmarshal([]byte(body), &refusal)
	if resp.StatusCode != http.StatusUnprocessableEntity || refusal.Code != "bad_input" || refusal.Refused == nil || refusal.Refused.Line != 9 ||
		!strings.Contains(refusal.Refused.Msg, `unknown keyword "weigth"`) || !strings.Contains(refusal.Error, "keepalived line 9: ") {
		t.Errorf("typo: %s %s", resp.Status, body)
	}
	// ignore_unknown=true goes on, and lists it.
	resp, body = do(t, g, admin, "POST", "/api/v1/import?format=keepalived&apply=false&ignore_unknown=true", typo)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"line": 9,`) || !strings.Contains(body, `unknown keyword \"weigth\"`) {
		t.Errorf("ignore_unknown: %s %s", resp.Status, body)
	}
	if resp, body = do(t, g, admin, "POST", "/api/v1/import?format=keepalived&ignore_unknown=maybe", typo); resp.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(body, `ignore_unknown: \"maybe\" is not true or false`) {
		t.Errorf("ignore_unknown=maybe: %s %s", resp.Status, body)
	}
	// config_id picks keepalived's @ID lines.
	cond := "virtual_server 198.18.0.100 80 {\n  protocol TCP\n@lb1 real_server 198.18.0.11 80 {\n@lb1 }\n@^lb1 real_server 198.18.0.12 80 {\n@^lb1 }\n}\n"
	for id, want := range map[string]string{"lb1": "198.18.0.11", "lb2": "198.18.0.12"} {
		resp, body = do(t, g, admin, "POST", "/api/v1/import?format=keepalived&apply=false&config_id="+id, cond)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "1 virtual services, 1 real servers") {
			t.Errorf("config_id=%s: %s %s", id, resp.Status, body)
		}
		if _, st := do(t, g, admin, "GET", "/api/v1/state", ""); !strings.Contains(st, want) {
			t.Errorf("config_id=%s: want real server %s: %s", id, want, st)
		}
	}
	// An import with no services does not empty a state that has some...
	empty := "global_defs {\n}\n"
	if resp, body = do(t, g, admin, "POST", "/api/v1/import?format=keepalived", empty); resp.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(body, "would remove all 1 stored ones (--allow-empty") {
		t.Errorf("empty import: %s %s", resp.Status, body)
	}
	// ...unless allow_empty.
	if resp, body = do(t, g, admin, "POST", "/api/v1/import?format=keepalived&apply=false&allow_empty=true", empty); resp.StatusCode != http.StatusOK ||
		!strings.Contains(body, `"summary": "0 virtual services, 0 real servers, 1 kept"`) {
		t.Errorf("allow_empty: %s %s", resp.Status, body)
	}
}

// POST /api/v1/import takes ldirectord.cf, with its report; a passwd's
// value is neither stored nor reported.
func TestAPIImportLdirectord(t *testing.T) {
	g := servertest.Start(t)
	setUp(t, g)
	admin := g.Tokens[auth.Admin]
	doc := "virtual=198.18.0.100:3306\n    real=198.18.0.11:3306 gate\n    service=mysql\n    login=\"mon\"\n    passwd=\"hunter2\"\n"
	resp, body := do(t, g, admin, "POST", "/api/v1/import?format=ldirectord&name=ldirectord.cf&apply=false", doc)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "1 virtual services, 1 real servers, 3 kept") || strings.Contains(body, "hunter2") {
		t.Fatalf("import: %s %s", resp.Status, body)
	}
	resp, body = do(t, g, admin, "GET", "/api/v1/state", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"key": "passwd"`) && !strings.Contains(body, `"key":"passwd"`) || strings.Contains(body, "hunter2") {
		t.Fatalf("state: %s %s", resp.Status, body)
	}
	resp, body = do(t, g, admin, "POST", "/api/v1/import?format=ldirectord", doc+"    colour=blue\n")
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "line 6") || !strings.Contains(body, "colour=blue") {
		t.Fatalf("unknown key: %s %s", resp.Status, body)
	}
}

// A keepalived director's file, VRRP side and all: its vrrp_instance
// becomes settings.redundancy with its notify programs, its priority the
// node's own, global_defs' mail settings settings.alerts.smtp; the export
// writes them back with the node's priority.
const kaPairDoc = `global_defs {
  router_id lb1
  notification_email {
    ops@example.org
  }
  notification_email_from lb1@example.org
  smtp_server 198.18.0.25
}
vrrp_instance VI_WEB {
  state MASTER
  interface eth0
  virtual_router_id 61
  priority 150
  advert_int 1
  unicast_src_ip 198.18.0.2
  unicast_peer {
    198.18.0.3
  }
  virtual_ipaddress {
    198.18.0.100/32 dev eth0
  }
  notify_master "/etc/keepalived/to-master.sh web"
  notify /usr/local/bin/ka-notify
  smtp_alert
}
virtual_server 198.18.0.100 80 {
  lb_kind DR
  protocol TCP
  real_server 198.18.0.11 80 {
    notify_down "/etc/keepalived/rs.sh down"
  }
}
`

func TestAPIImportKeepalivedPair(t *testing.T) {
	g := servertest.Start(t)
	setUp(t, g)
	admin := g.Tokens[auth.Admin]
	resp, body := do(t, g, admin, "POST", "/api/v1/import?format=keepalived&name=lb1.conf&apply=false", kaPairDoc)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("import: %s %s", resp.Status, body)
	}
	var res struct {
		Report struct {
			Node     *formats.NodeHint `json:"node"`
			Warnings []formats.Note    `json:"warnings"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatal(err)
	}
	if n := res.Report.Node; n == nil || n.Priority != 150 || n.Role != "auto" {
		t.Errorf("report's node %+v, want priority 150, role auto", n)
	}
	_, body = do(t, g, admin, "GET", "/api/v1/node", "")
	var node struct {
		Priority int    `json:"priority"`
		Role     string `json:"role"`
	}
	if err := json.Unmarshal([]byte(body), &node); err != nil || node.Priority != 150 || node.Role != "auto" {
		t.Errorf("node after the import: %s (%v), want priority 150", body, err)
	}
	_, body = do(t, g, admin, "GET", "/api/v1/state", "")
	var st struct {
		Settings struct {
			Redundancy struct {
				VRID         int      `json:"vrid"`
				Instance     string   `json:"instance"`
				Peers        []string `json:"unicast_peers"`
				NotifyMaster []string `json:"notify_master"`
				Notify       []string `json:"notify"`
				SMTPAlert    *bool    `json:"smtp_alert"`
			} `json:"redundancy"`
			Alerts struct {
				SMTP struct {
					Server   string   `json:"server"`
					To       []string `json:"to"`
					RouterID string   `json:"router_id"`
				} `json:"smtp"`
			} `json:"alerts"`
		} `json:"settings"`
		Services []struct {
			Interface string `json:"interface"`
			Servers   []struct {
				NotifyDown []string `json:"notify_down"`
			} `json:"servers"`
		} `json:"services"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	r := st.Settings.Redundancy
	if r.VRID != 61 || r.Instance != "VI_WEB" || !cmp.Equal(r.Peers, []string{"198.18.0.2", "198.18.0.3"}) ||
		!cmp.Equal(r.NotifyMaster, []string{"/etc/keepalived/to-master.sh", "web"}) || !cmp.Equal(r.Notify, []string{"/usr/local/bin/ka-notify"}) ||
		r.SMTPAlert == nil || !*r.SMTPAlert {
		t.Errorf("redundancy %+v", r)
	}
	if m := st.Settings.Alerts.SMTP; m.Server != "198.18.0.25" || !cmp.Equal(m.To, []string{"ops@example.org"}) || m.RouterID != "lb1" {
		t.Errorf("alerts.smtp %+v", m)
	}
	if len(st.Services) != 1 || st.Services[0].Interface != "eth0" || !cmp.Equal(st.Services[0].Servers[0].NotifyDown, []string{"/etc/keepalived/rs.sh", "down"}) {
		t.Errorf("services %+v: want the VIP on eth0 and the server's notify_down", st.Services)
	}
	_, body = do(t, g, admin, "GET", "/api/v1/export?format=keepalived", "")
	for _, want := range []string{"vrrp_instance VI_WEB {", "priority 150", "virtual_router_id 61", "notify_master \"/etc/keepalived/to-master.sh web\"",
		"notify /usr/local/bin/ka-notify", "smtp_alert yes", "198.18.0.100\n", "smtp_server 198.18.0.25", "ops@example.org", "notify_down \"/etc/keepalived/rs.sh down\""} {
		if !strings.Contains(body, want) {
			t.Errorf("export lacks %q:\n%s", want, body)
		}
	}
}
