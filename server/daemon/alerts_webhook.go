package daemon

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/internal/regularfile"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/events"
)

// SignatureHeader carries a signed post's signature: t=UNIX,v1=HEX, HEX
// the hex HMAC-SHA256 of "UNIX.BODY" with the webhook's key.
const SignatureHeader = "Ipvsctl-Signature"

// amRule pairs the events that fire an Alertmanager alert with those that
// resolve it. A kind is an event's type, or type/state for the types whose
// state field says which way it went (vrrp.state, bgp.session). The alert
// is named by its firing kind's type (and state), the event's subject, the
// director and the fields listed: the fields both sides carry, so that the
// resolving post names the very alert the firing one did.
type amRule struct {
	fire    string
	resolve []string
	labels  []string
}

var amRules = []amRule{
	{events.ServerDown, []string{events.ServerUp, events.ServerBack}, []string{"service", "server", "service_name", "server_name"}},
	{events.ServerQuiesced, []string{events.ServerUp, events.ServerBack}, []string{"service", "server", "service_name", "server_name"}},
	{events.QuorumLost, []string{events.QuorumRegained}, []string{"service"}},
	{events.SorryIn, []string{events.SorryOut}, []string{"service", "sorry"}},
	{events.VRRPState + "/fault", []string{events.VRRPState + "/master", events.VRRPState + "/backup", events.VRRPState + "/stop"}, []string{"family"}},
	{events.BGPSession + "/down", []string{events.BGPSession + "/up"}, []string{"router", "asn"}},
}

// amKind is e's kind in amRules.
func amKind(e server.Event) string {
	if e.Type == events.VRRPState || e.Type == events.BGPSession {
		return e.Type + "/" + e.Fields["state"]
	}
	return e.Type
}

// amAlert is one alert of Alertmanager's POST /api/v2/alerts.
type amAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      *time.Time        `json:"endsAt,omitempty"`
}

// alertmanagerAlerts are the alerts e fires or resolves; an event no rule
// pairs fires an alert of its own, labelled with all its fields, that
// Alertmanager resolves after its resolve_timeout.
func alertmanagerAlerts(e server.Event, director string, now time.Time) []amAlert {
	kind := amKind(e)
	annotations := map[string]string{"summary": e.Message}
	for k, v := range e.Fields {
		annotations[k] = v
	}
	var out []amAlert
	for _, r := range amRules {
		resolves := slices.Contains(r.resolve, kind)
		if r.fire != kind && !resolves {
			continue
		}
		typ, state, _ := strings.Cut(r.fire, "/")
		l := map[string]string{"alertname": typ, "subject": e.Subject, "director": director}
		if state != "" {
			l["state"] = state
		}
		for _, f := range r.labels {
			if v := e.Fields[f]; v != "" {
				l[f] = v
			}
		}
		a := amAlert{Labels: l, Annotations: annotations, StartsAt: e.Time}
		if resolves {
			end := now
			if end.Before(e.Time) {
				end = e.Time // Alertmanager refuses an alert that ends before it starts
			}
			a.EndsAt = &end
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		l := map[string]string{"alertname": e.Type, "subject": e.Subject, "director": director}
		for k, v := range e.Fields {
			if _, taken := l[k]; !taken {
				l[k] = v
			}
		}
		out = append(out, amAlert{Labels: l, Annotations: map[string]string{"summary": e.Message}, StartsAt: e.Time})
	}
	return out
}

// webhookTakes says whether w posts e: its types select it, or (format
// alertmanager) they select an event that e resolves.
func webhookTakes(w *ipvsmgr.Webhook, e server.Event) bool {
	f := events.Filter{Types: w.Types}
	if f.Match(e) {
		return true
	}
	if w.Format != "alertmanager" {
		return false
	}
	kind := amKind(e)
	for _, r := range amRules {
		typ, _, _ := strings.Cut(r.fire, "/")
		if slices.Contains(r.resolve, kind) && f.Match(server.Event{Type: typ}) {
			return true
		}
	}
	return false
}

// webhookBody is what w posts for e, if it takes e.
func webhookBody(w *ipvsmgr.Webhook, e server.Event, director string, now time.Time) ([]byte, bool) {
	if !webhookTakes(w, e) {
		return nil, false
	}
	var v any = e // as /api/v1/events gives it
	switch w.Format {
	case "alertmanager":
		v = alertmanagerAlerts(e, director, now)
	case "slack":
		v = map[string]string{"text": "[" + director + "] " + e.Message}
	}
	b, err := json.Marshal(v)
	return b, err == nil
}

// webhookClient posts to the webhooks: no redirect followed (a POST
// redirected turns into a GET), each attempt bounded by its timeout.
type webhookClient struct {
	http *http.Client
	now  func() time.Time
}

func newWebhookClient() *webhookClient {
	return &webhookClient{now: time.Now, http: &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// post makes one attempt; a failure is worth another unless the receiver
// refused the post for good (a 4xx other than 408 and 429, a redirect),
// or its key cannot be read.
func (c *webhookClient) post(ctx context.Context, w *ipvsmgr.Webhook, body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(cmp.Or(w.Timeout, ipvsmgr.DefaultWebhookTimeout))*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ipvsctl")
	if w.SecretFile != "" {
		// Read at each post (a new key needs no reload): a private file,
		// one line, as the API tokens' files are.
		key, err := regularfile.ReadSecret(w.SecretFile)
		if err != nil {
			return false, fmt.Errorf("secret_file: %w", err)
		}
		req.Header.Set(SignatureHeader, sign([]byte(key), c.now(), body))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return true, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return false, nil
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return true, fmt.Errorf("answered %s", resp.Status)
	default:
		return false, fmt.Errorf("answered %s", resp.Status)
	}
}

// sign is the SignatureHeader's value for body at t.
func sign(key []byte, t time.Time, body []byte) string {
	unix := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(unix + "."))
	mac.Write(body)
	return "t=" + unix + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}
