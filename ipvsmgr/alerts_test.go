package ipvsmgr

import (
	"errors"
	"strings"
	"testing"
)

func TestAlertsValidation(t *testing.T) {
	for _, tc := range []struct {
		alerts, field, msg string
	}{
		{`{"smtp":{"server":"","to":["ops@example.org"]}}`, "settings.alerts.smtp.server", `"" is not a mail relay`},
		{`{"smtp":{"server":"198.18.0.25","port":70000,"to":["ops@example.org"]}}`, "settings.alerts.smtp.port", "70000 is out of range 1..65535"},
		{`{"smtp":{"server":"198.18.0.25"}}`, "settings.alerts.smtp.to", "no address"},
		{`{"smtp":{"server":"198.18.0.25","to":["ops@example.org","<x>"]}}`, "settings.alerts.smtp.to[1]", `"<x>" is not a mail address`},
		{`{"smtp":{"server":"198.18.0.25","to":["ops@example.org"],"from":"lb@"}}`, "settings.alerts.smtp.from", `"lb@" is not a mail address`},
		{`{"smtp":{"server":"198.18.0.25","to":["ops@example.org"],"helo_name":"a b"}}`, "settings.alerts.smtp.helo_name", `"a b" is not a host name`},
		{`{"smtp":{"server":"198.18.0.25","to":["ops@example.org"],"connect_timeout":-1}}`, "settings.alerts.smtp.connect_timeout", "-1 is out of range 0..3600"},
		{`{"smtp":{"server":"198.18.0.25","to":["ops@example.org"],"router_id":"a\nb"}}`, "settings.alerts.smtp.router_id", "holds a line end"},
		{`{"webhooks":[{"url":"ftp://198.18.0.9/"}]}`, "settings.alerts.webhooks[0].url", `"ftp://198.18.0.9/" is not an http:// or https:// URL`},
		{`{"webhooks":[{"url":"https://198.18.0.9/","format":"xml"}]}`, "settings.alerts.webhooks[0].format", `"xml" is not a webhook format (want event, alertmanager, slack)`},
		{`{"webhooks":[{"url":"https://198.18.0.9/","secret_file":"/etc/shadow"}]}`, "settings.alerts.webhooks[0].secret_file", `"/etc/shadow" is not in /etc/ipvsctl/secrets/`},
		{`{"webhooks":[{"url":"https://198.18.0.9/","secret_file":"k"}]}`, "settings.alerts.webhooks[0].secret_file", `"k" is not a clean absolute path`},
		{`{"webhooks":[{"url":"https://198.18.0.9/","types":["realserver.","Real Server"]}]}`, "settings.alerts.webhooks[0].types[1]", `"Real Server" is not an event type`},
		{`{"webhooks":[{"url":"https://198.18.0.9/","timeout":301}]}`, "settings.alerts.webhooks[0].timeout", "301 is out of range 0..300"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			wantProblem(t, `{"settings":{"alerts":`+tc.alerts+`},"services":[]}`, tc.field, tc.msg)
		})
	}
	ok := `{"settings":{"alerts":{"smtp":{"server":"mail.example.org","port":587,"to":["ops@example.org"],"from":"lb@example.org"},` +
		`"webhooks":[{"url":"http://198.18.0.9:9093/api/v2/alerts","format":"alertmanager","types":["realserver.down","vrrp."]}]}},"services":[]}`
	st, err := DecodeState(strings.NewReader(ok))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(st); err != nil {
		t.Fatal(err)
	}
}

// TestSMTPAlertDefaults is keepalived's rule (check_data.c, vrrp.c): a real
// server mails unless told not to, a service and the VRRP instance only when
// told to; the object's own smtp_alert first, then the kind's global switch,
// then smtp_alert.
func TestSMTPAlertDefaults(t *testing.T) {
	yes, no := true, false
	var none *SMTPAlerts
	if none.ForServer(nil) || none.ForVRRP(&yes) {
		t.Error("no smtp settings: no mail")
	}
	s := &SMTPAlerts{}
	if !s.ForServer(nil) || s.ForService(nil) || s.ForVRRP(nil) {
		t.Errorf("defaults: server %v service %v vrrp %v, want true false false", s.ForServer(nil), s.ForService(nil), s.ForVRRP(nil))
	}
	s.Alert = &no
	if s.ForServer(nil) || !s.ForServer(&yes) {
		t.Error("smtp_alert off turns the servers' default off, not an own smtp_alert on")
	}
	s.Alert, s.AlertVRRP, s.AlertChecker = &yes, &no, &no
	if s.ForVRRP(nil) || s.ForServer(nil) || s.ForService(nil) || !s.ForVRRP(&yes) {
		t.Error("smtp_alert_vrrp and smtp_alert_checker come before smtp_alert")
	}
}

// wantProblem compiles doc and wants a validation problem of field whose
// message holds msg.
func wantProblem(t *testing.T, doc, field, msg string) {
	t.Helper()
	st, err := DecodeState(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(st)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a validation error", err)
	}
	for _, p := range ve.Problems {
		if p.Field == field && strings.Contains(p.Message, msg) {
			return
		}
	}
	t.Errorf("problems %v, want %s: ...%s...", ve.Problems, field, msg)
}
