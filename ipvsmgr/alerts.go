package ipvsmgr

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Alerts tell people and programs what the director does: mail as
// keepalived's smtp_alert sends it, and webhooks (a JSON POST of each event,
// signed). The daemon sends them from the event log, never from the loops
// that publish the events.
type Alerts struct {
	SMTP     *SMTPAlerts `json:"smtp,omitempty"`
	Webhooks []Webhook   `json:"webhooks,omitempty"`
}

// SMTPAlerts are keepalived's global_defs mail settings. Which objects mail
// is keepalived's rule: a real server's smtp_alert, else AlertChecker, else
// Alert, else on; a service's (its quorum) and the VRRP instance's: their
// own, else AlertChecker (AlertVRRP), else Alert, else off.
type SMTPAlerts struct {
	// Server is the relay (smtp_server): an address or a host name, on
	// Port (default 25).
	Server string `json:"server"`
	Port   int    `json:"port,omitempty"`
	// HeloName (smtp_helo_name) is what HELO says; default the host's name.
	HeloName string `json:"helo_name,omitempty"`
	// From (notification_email_from): default root@ the host's name.
	From string `json:"from,omitempty"`
	// To (notification_email): each address the mail goes to.
	To []string `json:"to"`
	// ConnectTimeout (smtp_connect_timeout) bounds the whole exchange with
	// the relay, in seconds; 0 means 30.
	ConnectTimeout int `json:"connect_timeout,omitempty"`
	// RouterID (global_defs router_id) is the director's name in the
	// subjects ("[RouterID] VRRP Instance VI_1 - Entering MASTER state");
	// default the host's name.
	RouterID string `json:"router_id,omitempty"`
	// Alert, AlertVRRP and AlertChecker are keepalived's smtp_alert,
	// smtp_alert_vrrp and smtp_alert_checker: the defaults of the objects'
	// own smtp_alert.
	Alert        *bool `json:"alert,omitempty"`
	AlertVRRP    *bool `json:"alert_vrrp,omitempty"`
	AlertChecker *bool `json:"alert_checker,omitempty"`
	// NoEmailFaults (no_email_faults) sends no mail for a FAULT state.
	NoEmailFaults bool `json:"no_email_faults,omitempty"`
}

// Webhook posts each event it takes to URL, with retries, from a bounded
// queue.
type Webhook struct {
	URL string `json:"url"`
	// Format is event (the default: the event as /api/v1/events gives
	// it), alertmanager (Alertmanager's POST /api/v2/alerts: a down event
	// fires an alert, its up resolves it) or slack (Slack's and
	// Mattermost's incoming webhooks: {"text": ...}).
	Format string `json:"format,omitempty"`
	// SecretFile holds the key (under /etc/ipvsctl/secrets/ or
	// /var/lib/ipvsctl/secrets/ on each director) that signs each post:
	// header Ipvsctl-Signature: t=UNIX,v1=HEX, HEX the HMAC-SHA256 of
	// "UNIX.BODY". Absent, posts are not signed.
	SecretFile string `json:"secret_file,omitempty"`
	// Types are the event types it takes (a type, or a prefix ending in
	// "."); empty, every type.
	Types []string `json:"types,omitempty"`
	// Timeout bounds each attempt, in seconds; 0 means 10.
	Timeout int `json:"timeout,omitempty"`
}

// Defaults of the alerts.
const (
	DefaultSMTPPort           = 25
	DefaultSMTPConnectTimeout = 30 // seconds, keepalived's
	DefaultWebhookTimeout     = 10 // seconds
)

// Webhook formats.
var WebhookFormats = []string{"event", "alertmanager", "slack"}

// smtpDefault is the first of own and defaults that is set, else last.
func smtpDefault(last bool, own *bool, defaults ...*bool) bool {
	for _, b := range append([]*bool{own}, defaults...) {
		if b != nil {
			return *b
		}
	}
	return last
}

// ForServer is whether a real server whose own smtp_alert is own mails its
// up and down (keepalived: on unless told otherwise).
func (s *SMTPAlerts) ForServer(own *bool) bool {
	return s != nil && smtpDefault(true, own, s.AlertChecker, s.Alert)
}

// ForService is whether a service mails its quorum lost and regained.
func (s *SMTPAlerts) ForService(own *bool) bool {
	return s != nil && smtpDefault(false, own, s.AlertChecker, s.Alert)
}

// ForVRRP is whether the VRRP instance mails its changes of state.
func (s *SMTPAlerts) ForVRRP(own *bool) bool {
	return s != nil && smtpDefault(false, own, s.AlertVRRP, s.Alert)
}

var (
	// A mail address: name@domain, or a local name alone (keepalived's
	// samples mail "acassen", a mailbox of the relay's host).
	mailAddress = regexp.MustCompile(`^[^\s<>@,;"]+(@[^\s<>@,;"]+)?$`)
	eventType   = regexp.MustCompile(`^[a-z_]+(\.[a-z_]+)*\.?$`)
)

func (v *validator) alerts(field string, a *Alerts) {
	if s := a.SMTP; s != nil {
		f := field + ".smtp"
		if s.Server == "" || strings.ContainsAny(s.Server, " \t\r\n/\x00") {
			v.addf(f+".server", "%q is not a mail relay (an address or a host name)", s.Server)
		}
		if s.Port != 0 {
			v.rangeCheck(f+".port", s.Port, 1, 65535)
		}
		if s.HeloName != "" && !validDNSName(s.HeloName) {
			v.addf(f+".helo_name", "%q is not a host name", s.HeloName)
		}
		if s.From != "" && !mailAddress.MatchString(s.From) {
			v.addf(f+".from", "%q is not a mail address (name@domain, or a local name)", s.From)
		}
		if len(s.To) == 0 {
			v.addf(f+".to", "no address: the mail goes to at least one (notification_email)")
		}
		for i, to := range s.To {
			if !mailAddress.MatchString(to) {
				v.addf(fmt.Sprintf("%s.to[%d]", f, i), "%q is not a mail address (name@domain, or a local name)", to)
			}
		}
		v.rangeCheck(f+".connect_timeout", s.ConnectTimeout, 0, 3600)
		if strings.ContainsAny(s.RouterID, "\r\n\x00") || len(s.RouterID) > 255 {
			v.addf(f+".router_id", "%q holds a line end or is longer than 255 bytes", s.RouterID)
		}
	}
	for i, w := range a.Webhooks {
		f := fmt.Sprintf("%s.webhooks[%d]", field, i)
		if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.addf(f+".url", "%q is not an http:// or https:// URL", w.URL)
		}
		if w.Format != "" && !slices.Contains(WebhookFormats, w.Format) {
			v.addf(f+".format", "%q is not a webhook format (want %s)", w.Format, strings.Join(WebhookFormats, ", "))
		}
		switch sf := w.SecretFile; {
		case sf == "":
		case !filepath.IsAbs(sf) || filepath.Clean(sf) != sf || strings.ContainsRune(sf, 0):
			v.addf(f+".secret_file", "%q is not a clean absolute path (the file the director reads the key from)", sf)
		case !inSecretDir(sf):
			v.addf(f+".secret_file", "%q is not in %s", sf, strings.Join(CheckSecretDirs(), " or "))
		}
		for j, t := range w.Types {
			if !eventType.MatchString(t) {
				v.addf(fmt.Sprintf("%s.types[%d]", f, j), "%q is not an event type (realserver.down) or a prefix of types (realserver.)", t)
			}
		}
		v.rangeCheck(f+".timeout", w.Timeout, 0, 300)
	}
}
