package daemon

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/events"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// alertRig is a daemon (a real core, event log and store, a fake kernel)
// that sends the alerts of doc, its webhook retries 1 ms apart; counts
// are its OnAlert calls, by "kind outcome".
type alertRig struct {
	core   *server.Core
	evs    *events.Log
	st     *store.Store
	mu     sync.Mutex
	counts map[string]int
	// stop stops the daemon and returns once its Run has (the test's
	// cleanup does if the test did not).
	stop func()
}

func newAlertRig(t *testing.T, ctx context.Context, doc string, setup ...func(*Daemon)) *alertRig {
	t.Helper()
	st := testStore(t, ctx)
	evs, err := events.New(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := fakekernel.New()
	core := server.New(server.Config{Store: st, Events: evs, OpenKernel: openFake(k, nil)})
	r := &alertRig{core: core, evs: evs, st: st, counts: map[string]int{}}
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("ALERTS_DEBUG") != "" {
		logger = slog.Default()
	}
	d := New(core, st, logger)
	d.Interval, d.Poll = time.Hour, 50*time.Millisecond
	d.AlertRetry = func(int) time.Duration { return time.Millisecond }
	d.OnAlert(func(kind, outcome string) {
		r.mu.Lock()
		r.counts[kind+" "+outcome]++
		r.mu.Unlock()
	})
	for _, f := range setup {
		f(d)
	}
	dctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			stop()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(r.stop)
	state, err := ipvsmgr.DecodeState(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := applyState(ctx, core, server.Actor{Name: "t", Via: "test"}, state, "test"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the daemon to know the alerts", func() bool {
		_, des := d.sk.current()
		return des != nil && des.Settings.Alerts != nil
	})
	return r
}

func (r *alertRig) count(what string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[what]
}

// publish tells of a test event, as a runner of the daemon would.
func (r *alertRig) publish(typ, subject string, fields map[string]string) {
	r.evs.Publish(events.Event{Type: typ, Subject: subject, Message: typ + " " + subject, Fields: fields})
}

// receiver is a webhook's receiver on loopback: answer says what each post
// (numbered from 1) is answered.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	posts  [][]byte
	answer func(n int) int
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	rc := &receiver{answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.posts = append(rc.posts, b)
		n := len(rc.posts)
		rc.mu.Unlock()
		w.WriteHeader(rc.answer(n))
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) got() [][]byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([][]byte(nil), rc.posts...)
}

// waitUntil polls cond until it holds or ctx ends.
func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func webhookDoc(hooks string) string {
	return `{"settings": {"alerts": {"webhooks": [` + hooks + `]}},
  "services": [{"name": "web", "address": "198.18.0.100", "port": 80, "forwarding": "nat",
    "servers": [{"name": "r1", "address": "198.18.1.11", "port": 80}]}]}`
}

// A post answered 500 is tried again (after the injected backoff) until it
// is answered 2xx; what it posts is the event as /api/v1/events gives it.
func TestWebhookRetriesA500ThenDelivers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc := newReceiver(t, func(n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	r := newAlertRig(t, ctx, webhookDoc(fmt.Sprintf(`{"url": %q, "types": ["replication."]}`, rc.URL)))
	r.publish(events.Replication, "https://lb2:3636", map[string]string{"peer": "https://lb2:3636", "error": "refused"})
	waitUntil(t, ctx, "the post delivered", func() bool { return r.count("webhook sent") == 1 })
	posts := rc.got()
	if len(posts) != 3 || r.count("webhook failed") != 0 {
		t.Fatalf("%d posts, %d failed: want 3 (two answered 500, then delivered), none failed", len(posts), r.count("webhook failed"))
	}
	evs, err := r.core.ReadEvents(ctx, server.Actor{}, 0, server.EventFilter{Types: []string{events.Replication}})
	if err != nil || len(evs) != 1 {
		t.Fatalf("read the event: %v, %d", err, len(evs))
	}
	want, _ := json.Marshal(evs[0])
	for i, p := range posts {
		if string(p) != string(want) {
			t.Errorf("post %d:\n%s\nwant the event as the API gives it:\n%s", i+1, p, want)
		}
	}
}

// A 400 is the receiver's refusal: not tried again. The types filter keeps
// the webhook to what it asked for.
func TestWebhookDoesNotRetryA400AndFiltersTypes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc := newReceiver(t, func(int) int { return http.StatusBadRequest })
	r := newAlertRig(t, ctx, webhookDoc(fmt.Sprintf(`{"url": %q, "format": "slack", "types": ["bgp.", "drift.repaired"]}`, rc.URL)))
	r.publish(events.Replication, "https://lb2:3636", nil) // not taken
	r.publish(events.BGPAnnounced, "198.18.0.100/32", map[string]string{"prefix": "198.18.0.100/32"})
	r.publish(events.DriftRepaired, "kernel", map[string]string{"changes": "3"})
	waitUntil(t, ctx, "both posts given up", func() bool { return r.count("webhook failed") == 2 })
	posts := rc.got()
	if len(posts) != 2 || r.count("webhook sent") != 0 {
		t.Fatalf("%d posts, %d sent: want one attempt each of the two events taken", len(posts), r.count("webhook sent"))
	}
	host, _ := os.Hostname()
	for i, want := range []string{"bgp.announced 198.18.0.100/32", "drift.repaired kernel"} {
		var m map[string]string
		if err := json.Unmarshal(posts[i], &m); err != nil || m["text"] != "["+host+"] "+want {
			t.Errorf("post %d: %s (%v), want Slack's text [%s] %s", i+1, posts[i], err, host, want)
		}
	}
}

// A receiver that does not keep up: past alertQueue waiting, the oldest
// waiting post is dropped and counted; the others go in order.
func TestWebhookQueueDropsTheOldest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	var first sync.Once
	arrived := make(chan struct{})
	rc := newReceiver(t, func(n int) int {
		if n == 1 {
			first.Do(func() { close(arrived) })
			<-release
		}
		return http.StatusOK
	})
	t.Cleanup(free) // before the receiver's Close, which waits for its handlers
	// The first post's attempt outlasts the test: it is under way until
	// the receiver answers.
	r := newAlertRig(t, ctx, webhookDoc(fmt.Sprintf(`{"url": %q, "types": ["replication.failed"], "timeout": 300}`, rc.URL)))
	post := func(i int) {
		r.publish(events.Replication, "https://lb2:3636", map[string]string{"error": strconv.Itoa(i)})
	}
	post(0)
	select {
	case <-arrived: // post 0 is under way; the queue is empty
	case <-ctx.Done():
		t.Fatal("the first post never arrived")
	}
	for i := 1; i <= alertQueue+2; i++ {
		post(i)
	}
	waitUntil(t, ctx, "two posts dropped", func() bool { return r.count("webhook dropped") == 2 })
	// The core's view of the destination: the full queue, the drops, and
	// no result yet (the first post is still under way).
	if ds := r.core.AlertDeliveries(); len(ds) != 1 || ds[0].Destination != rc.URL || ds[0].Queued != alertQueue ||
		ds[0].Dropped != 2 || ds[0].Sent != 0 || ds[0].LastOK != nil {
		t.Errorf("deliveries while the receiver hangs: %+v, want %d queued and 2 dropped", ds, alertQueue)
	}
	free()
	waitUntil(t, ctx, "the others delivered", func() bool { return r.count("webhook sent") == alertQueue+1 })
	posts := rc.got()
	if len(posts) != alertQueue+1 {
		t.Fatalf("%d posts, want %d", len(posts), alertQueue+1)
	}
	for i, p := range posts {
		var e events.Event
		json.Unmarshal(p, &e)
		want := i + 2 // 1 and 2 were the oldest waiting
		if i == 0 {
			want = 0
		}
		if e.Fields["error"] != strconv.Itoa(want) {
			t.Fatalf("post %d is of event %s, want %d", i, e.Fields["error"], want)
		}
	}
}

// A receiver that never answers does not hold up the daemon's stop: the
// post under way ends alertStopGrace after it (not at its own timeout) and
// is counted failed; the one waiting behind it is tried once, not retried.
func TestWebhookDoesNotHoldUpTheStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hang := make(chan struct{})
	rc := newReceiver(t, func(int) int { <-hang; return http.StatusOK })
	t.Cleanup(func() { close(hang) }) // before the receiver's Close
	r := newAlertRig(t, ctx, webhookDoc(fmt.Sprintf(`{"url": %q, "types": ["replication.failed"], "timeout": 300}`, rc.URL)))
	r.publish(events.Replication, "https://lb2:3636", map[string]string{"error": "1"})
	r.publish(events.Replication, "https://lb2:3636", map[string]string{"error": "2"})
	waitUntil(t, ctx, "the first post under way", func() bool { return len(rc.got()) == 1 })
	stopped := make(chan struct{})
	go func() { r.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("the daemon did not stop while a webhook hung")
	}
	if got := r.count("webhook failed"); got != 2 || r.count("webhook sent") != 0 {
		t.Errorf("%d failed, %d sent: want both failed", got, r.count("webhook sent"))
	}
}

// In Alertmanager's format a real server found down fires an alert, and
// found back resolves the very same alert (same labels, endsAt set), even
// with types naming only the firing kind.
func TestWebhookAlertmanagerFiresAndResolves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rc := newReceiver(t, func(int) int { return http.StatusOK })
	b := newBackend(t)
	host, port, _ := net.SplitHostPort(b.addr)
	newAlertRig(t, ctx, fmt.Sprintf(`{"settings": {"alerts": {"webhooks": [{"url": %q, "format": "alertmanager", "types": ["realserver.down"]}]}},
  "services": [{"name": "web", "address": "198.18.0.100", "port": 80, "forwarding": "nat",
    "check": {"type": "tcp", "interval": 0.1, "timeout": 0.5, "rise": 1, "fall": 1, "on_failure": "remove"},
    "servers": [{"name": "r1", "address": %q, "port": %s}]}]}`, rc.URL, host, port))
	decode := func(p []byte) []amAlert {
		var as []amAlert
		if err := json.Unmarshal(p, &as); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return as
	}
	waitUntil(t, ctx, "the first pass's post (a resolve of realserver.down and .quiesced)", func() bool { return len(rc.got()) == 1 })
	b.close()
	waitUntil(t, ctx, "the down's post", func() bool { return len(rc.got()) == 2 })
	b.open()
	waitUntil(t, ctx, "the back's post", func() bool { return len(rc.got()) == 3 })
	posts := rc.got()
	fired := decode(posts[1])
	if len(fired) != 1 || fired[0].EndsAt != nil || fired[0].StartsAt.IsZero() {
		t.Fatalf("down: %s, want one alert firing (startsAt, no endsAt)", posts[1])
	}
	director, _ := os.Hostname()
	ref := "-t 198.18.0.100:80 -r " + b.addr
	want := map[string]string{"alertname": "realserver.down", "subject": ref, "director": director,
		"service": "-t 198.18.0.100:80", "server": b.addr, "service_name": "web", "server_name": "r1"}
	if fmt.Sprint(fired[0].Labels) != fmt.Sprint(want) {
		t.Errorf("firing labels %v, want %v", fired[0].Labels, want)
	}
	if fired[0].Annotations["reason"] == "" || fired[0].Annotations["summary"] == "" {
		t.Errorf("annotations %v: want the reason and the message", fired[0].Annotations)
	}
	resolved := decode(posts[2])
	if len(resolved) != 2 {
		t.Fatalf("back: %s, want the resolves of realserver.down and realserver.quiesced", posts[2])
	}
	if fmt.Sprint(resolved[0].Labels) != fmt.Sprint(want) || resolved[0].EndsAt == nil || resolved[0].EndsAt.Before(resolved[0].StartsAt) {
		t.Errorf("resolve %+v: want the firing alert's labels with endsAt after startsAt", resolved[0])
	}
	if resolved[1].Labels["alertname"] != events.ServerQuiesced || resolved[1].EndsAt == nil {
		t.Errorf("second resolve %+v: want realserver.quiesced's", resolved[1])
	}
}

// A signed post carries t=UNIX,v1=HEX, HEX the HMAC-SHA256 of "UNIX.BODY"
// with the key file's key (its line end dropped); a key file others may
// read is refused, and that post is not tried again.
func TestWebhookSignature(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "hook.key")
	if err := os.WriteFile(keyFile, []byte("s3cret-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var header string
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header, body = r.Header.Get(SignatureHeader), must(io.ReadAll(r.Body))
	}))
	defer srv.Close()
	c := newWebhookClient()
	c.now = func() time.Time { return time.Unix(1796342400, 0) }
	w := &ipvsmgr.Webhook{URL: srv.URL, SecretFile: keyFile}
	if retry, err := c.post(ctx, w, []byte(`{"id":1}`)); err != nil {
		t.Fatalf("post: %v (retry %v)", err, retry)
	}
	ts, mac, ok := strings.Cut(strings.TrimPrefix(header, "t="), ",v1=")
	if !ok || ts != "1796342400" {
		t.Fatalf("%s: %q, want t=1796342400,v1=HEX", SignatureHeader, header)
	}
	m := hmac.New(sha256.New, []byte("s3cret-key"))
	m.Write([]byte(ts + "." + string(body)))
	if want := hex.EncodeToString(m.Sum(nil)); mac != want {
		t.Errorf("v1=%s, want the HMAC of %q: %s", mac, ts+"."+string(body), want)
	}
	os.Chmod(keyFile, 0o644)
	if retry, err := c.post(ctx, w, []byte(`{"id":2}`)); err == nil || retry || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a key others may read: %v (retry %v), want refused, not retried", err, retry)
	}
}

func must[T any](v T, _ error) T { return v }

// The mail keepalived's smtp_alert sends, to the byte: the subjects, the
// checker's, quorum's and VRRP's bodies, which object mails (smtp_alert
// and its global switches), and VRRP's state mailed only when it differs
// from the last.
func TestAlertMails(t *testing.T) {
	off := false
	k := ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv4, Protocol: ipvsmgr.ProtoTCP, Addr: netip.MustParseAddr("198.18.0.10"), Port: 80}
	ref := ipvsmgr.ServerRef{Service: k, Server: ipvsmgr.DestKey{Addr: netip.MustParseAddr("198.18.1.11"), Port: 8080}}
	silent := ipvsmgr.ServerRef{Service: k, Server: ipvsmgr.DestKey{Addr: netip.MustParseAddr("198.18.1.12"), Port: 8080}}
	des := &ipvsmgr.Desired{
		Checks: []ipvsmgr.ServerCheck{{Ref: ref, Spec: ipvsmgr.CheckSpec{Type: "tcp"}}, {Ref: silent, Spec: ipvsmgr.CheckSpec{Type: "http"}, SMTPAlert: &off}},
		Sorry:  []ipvsmgr.SorryPolicy{{Service: k, Quorum: 2, Hysteresis: 1}},
	}
	des.Settings.Redundancy = &ipvsmgr.Redundancy{Instance: "VI_WEB"}
	on := true
	s := &ipvsmgr.SMTPAlerts{Server: "198.18.0.25", To: []string{"ops@example.test", "noc@example.test"}, RouterID: "lb1", AlertVRRP: &on}
	a := &alerter{host: "director.example.test", mailed: map[string]string{}}
	a.idx.update(des)
	cases := []struct {
		e       events.Event
		subject string
		body    string
	}{
		{events.Event{Type: events.ServerDown, Subject: ref.String(), Fields: map[string]string{"reason": "connection refused"}},
			"[lb1] Realserver [198.18.1.11]:tcp:8080 of virtual server [198.18.0.10]:tcp:80 - DOWN", "=> TCP CHECK failed on service : connection refused <="},
		{events.Event{Type: events.ServerBack, Subject: ref.String()},
			"[lb1] Realserver [198.18.1.11]:tcp:8080 of virtual server [198.18.0.10]:tcp:80 - UP", "=> TCP CHECK succeed on service <="},
		{events.Event{Type: events.ServerDown, Subject: silent.String()}, "", ""}, // its smtp_alert off
		// The service's smtp_alert is unset and so is smtp_alert: no quorum mail.
		{events.Event{Type: events.QuorumLost, Subject: k.String(), Fields: map[string]string{"healthy": "0"}}, "", ""},
		{events.Event{Type: events.VRRPState, Subject: "vrrp/ipv4", Fields: map[string]string{"family": "ipv4", "state": "master"}},
			"[lb1] VRRP Instance VI_WEB - Entering MASTER state", "=> VRRP Instance is now owning VRRP VIPs <="},
		{events.Event{Type: events.VRRPState, Subject: "vrrp/ipv4", Fields: map[string]string{"family": "ipv4", "state": "master"}}, "", ""},
		{events.Event{Type: events.VRRPState, Subject: "vrrp/ipv4", Fields: map[string]string{"family": "ipv4", "state": "fault"}},
			"[lb1] VRRP Instance VI_WEB - Entering FAULT state", "=> VRRP Instance is no longer owning VRRP VIPs <="},
		{events.Event{Type: events.VRRPState, Subject: "vrrp/ipv4", Fields: map[string]string{"family": "ipv4", "state": "stop"}},
			"[lb1] VRRP Instance VI_WEB - Stopping", "=> VRRP Instance stopping <="},
	}
	mailFor := func(e events.Event) (alertMail, bool) {
		ms := a.mailsFor(s, des, e)
		if len(ms) > 1 {
			t.Errorf("%s %v: %d mails, want one: %v", e.Type, e.Fields, len(ms), ms)
		}
		if len(ms) == 0 {
			return alertMail{}, false
		}
		return ms[0], true
	}
	for i, c := range cases {
		m, ok := mailFor(c.e)
		if ok != (c.subject != "") || m.Subject != c.subject || m.Body != c.body {
			t.Errorf("%d %s %v: mail %v %q / %q, want %q / %q", i, c.e.Type, c.e.Fields, ok, m.Subject, m.Body, c.subject, c.body)
		}
	}
	s.Alert, s.NoEmailFaults, s.RouterID = &on, true, ""
	a.mailed = map[string]string{}
	m, ok := mailFor(events.Event{Type: events.QuorumLost, Subject: k.String(), Fields: map[string]string{"healthy": "1", "at_start": "true"}})
	if want := "[director.example.test] Virtualserver [198.18.0.10]:tcp:80 - DOWN"; !ok || m.Subject != want || m.Body != "=> Starting with quorum down 2+1=1 <= 1 <=" {
		t.Errorf("quorum at start: %v %q / %q, want %q / keepalived's line", ok, m.Subject, m.Body, want)
	}
	m, _ = mailFor(events.Event{Type: events.QuorumRegained, Subject: k.String(), Fields: map[string]string{"healthy": "3"}})
	if m.Body != "=> Gained quorum 2+1=3 <= 3 <=" {
		t.Errorf("quorum regained: %q", m.Body)
	}
	if _, ok := mailFor(events.Event{Type: events.VRRPState, Fields: map[string]string{"family": "ipv4", "state": "fault"}}); ok {
		t.Error("no_email_faults: a FAULT was mailed")
	}
	// A sync group mails after its instance, in vrrp_sync_smtp_notifier's
	// words, each by the state it last mailed: smtp_alert_vrrp says for the
	// group, its own smtp_alert off silences it.
	s.NoEmailFaults, s.RouterID = false, "lb1"
	des.Settings.Redundancy.SyncGroup = &ipvsmgr.SyncGroup{Name: "VG_WEB"}
	a.mailed = map[string]string{"ipv4": "MASTER"}
	var got []string
	for _, state := range []string{"master", "backup", "backup"} {
		for _, m := range a.mailsFor(s, des, events.Event{Type: events.VRRPState, Fields: map[string]string{"family": "ipv4", "state": state}}) {
			got = append(got, m.Subject+" / "+m.Body)
		}
	}
	wantMails := []string{
		"[lb1] VRRP Group VG_WEB - Entering MASTER state / => All VRRP group instances are now in MASTER state <=",
		"[lb1] VRRP Instance VI_WEB - Entering BACKUP state / => VRRP Instance is no longer owning VRRP VIPs <=",
		"[lb1] VRRP Group VG_WEB - Entering BACKUP state / => All VRRP group instances are now in BACKUP state <=",
	}
	if fmt.Sprint(got) != fmt.Sprint(wantMails) {
		t.Errorf("sync group mails:\n%q\nwant\n%q", got, wantMails)
	}
	des.Settings.Redundancy.SyncGroup.SMTPAlert = &off
	if ms := a.mailsFor(s, des, events.Event{Type: events.VRRPState, Fields: map[string]string{"family": "ipv4", "state": "fault"}}); len(ms) != 1 || !strings.Contains(ms[0].Subject, "Instance") {
		t.Errorf("the group's smtp_alert no: %v, want the instance's mail alone", ms)
	}

	fwm := ipvsmgr.ServerRef{Service: ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv6, FWMark: 5}, Server: ipvsmgr.DestKey{Addr: netip.MustParseAddr("2001:db8::11"), Port: 443}}
	if got := fmtRS(fwm) + " " + fmtVS(fwm.Service); got != "[2001:db8::11]:tcp:443 FWM 5" {
		t.Errorf("FMT_RS, FMT_VS of a fwmark service: %q", got)
	}

	text := mailText(s, "root@lb1", alertMail{Subject: "[lb1] VRRP Instance VI_WEB - Stopping", Body: "=> VRRP Instance stopping <="},
		time.Date(2026, 12, 4, 9, 44, 8, 0, time.FixedZone("", 3600)))
	want := "Date: Fri, 04 Dec 2026 09:44:08 +0100\r\nFrom: root@lb1\r\nSubject: [lb1] VRRP Instance VI_WEB - Stopping\r\nX-Mailer: ipvsctl\r\n" +
		"To: ops@example.test,\r\n noc@example.test\r\n\r\n=> VRRP Instance stopping <=\r\n\r\n"
	if text != want {
		t.Errorf("mail text:\n%q\nwant keepalived's body_cmd:\n%q", text, want)
	}
}

// Each program run is counted by its name and how it ended, and kept in
// the audit record as the daemon's.
func TestProgramRunsAreCountedAndAudited(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := testStore(t, ctx)
	d := New(server.New(server.Config{Store: st}), st, nil)
	var results []string
	d.OnProgramRun(func(name, result string) { results = append(results, name+" "+result) })
	d.runProgram(ctx, "notify_up", []string{"/bin/true"}, 10*time.Second, "server", "-t 198.18.0.10:80 -r 198.18.1.11:80")
	d.runProgram(ctx, "notify_master", []string{"/bin/false"}, 10*time.Second, "instance", "VI_1")
	d.runProgram(ctx, "quorum_down", []string{"/bin/sleep", "30"}, 50*time.Millisecond, "service", "-t 198.18.0.10:80")
	if want := "[notify_up ok notify_master failed quorum_down timeout]"; fmt.Sprint(results) != want {
		t.Errorf("OnProgramRun heard %v, want %s", results, want)
	}
	rows, err := st.Audit(ctx, store.AuditFilter{Actor: "daemon"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Action+" | "+r.Target+" | "+r.Outcome)
	}
	want := []string{"run quorum_down | service -t 198.18.0.10:80 | failure", "run notify_master | instance VI_1 | failure",
		"run notify_up | server -t 198.18.0.10:80 -r 198.18.1.11:80 | success"} // newest first
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("audit %q, want %q", got, want)
	}
}
