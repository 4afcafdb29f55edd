//go:build vmtest

package vmtest

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/internal/testmta"
	"github.com/ipvsctl/ipvsctl/server/trust"
)

// notifyLogEnv names the file the test's notify script appends to: set in
// each director's environment, so one replicated document's programs write
// a file per director.
const notifyLogEnv = "IPVSCTL_VMTEST_NOTIFY_LOG"

// notifyScript writes the notify program: it appends its arguments, one
// line a run, to $IPVSCTL_VMTEST_NOTIFY_LOG.
func notifyScript(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\nprintf '%s\\n' \"$*\" >> \"$"+notifyLogEnv+"\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// vrrpNotify is settings.redundancy's notify programs, each the script
// with the state's word first: "master", "backup", and for notify
// keepalived's four arguments after "notify".
func vrrpNotify(script string) map[string]any {
	return map[string]any{"notify_master": []string{script, "master"}, "notify_backup": []string{script, "backup"},
		"notify": []string{script, "notify"}}
}

// notifyLines are the lines of a director's notify log that start with one
// of the words (the VRRP programs' or the real server's: the two subjects'
// programs run independently, each in order).
func notifyLines(path string, words ...string) []string {
	b, _ := os.ReadFile(path)
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if w, _, _ := strings.Cut(line, " "); slices.Contains(words, w) {
			out = append(out, line)
		}
	}
	return out
}

var vrrpWords = []string{"master", "backup", "notify"}

// withDoc edits a JSON document.
func withDoc(t *testing.T, doc string, edit func(m map[string]any)) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// event is one of /api/v1/events, and when the test had it.
type event struct {
	ID      int64             `json:"id"`
	Time    time.Time         `json:"time"`
	Type    string            `json:"type"`
	Subject string            `json:"subject"`
	Fields  map[string]string `json:"fields"`
	got     time.Time
}

// follower reads a director's GET /api/v1/events as Server-Sent Events,
// from the client's namespace, pinning the director's certificate.
type follower struct {
	mu     sync.Mutex
	events []event
	err    error // the last connection's end
}

func (p *pair) follow(d *lab, addr, query string) *follower {
	t := p.t
	t.Helper()
	// A token of the viewer the pair made (p.nodes), its stdout alone.
	out, err := exec.Command("ip", "netns", "exec", d.dir, os.Getenv("IPVSCTL_BIN"), "--db", d.db,
		"token", "create", "--user", "peer", "--name", "events").Output()
	if err != nil {
		t.Fatalf("token create: %v", err)
	}
	tok := strings.TrimSpace(string(out))
	fp := d.fingerprint()
	tr := &http.Transport{DialContext: nsDialer(p.net.cli), TLSClientConfig: &tls.Config{InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if got := trust.Fingerprint(cs.PeerCertificates[0].Raw); got != fp {
				return fmt.Errorf("certificate %s, want %s", got, fp)
			}
			return nil
		}}}
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	// It connects (again, until the test ends, after the last event it
	// has: the daemon may not listen yet) and reads, in a goroutine of its
	// own: the test goes on meanwhile.
	go func() {
		defer close(done)
		hc := &http.Client{Transport: tr}
		for ctx.Err() == nil {
			f.mu.Lock()
			after := int64(0)
			if n := len(f.events); n > 0 {
				after = f.events[n-1].ID
			}
			f.mu.Unlock()
			req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("https://%s:3636/api/v1/events?after=%d&%s", addr, after, query), nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Accept", "text/event-stream")
			err := f.read(hc, req)
			f.mu.Lock()
			f.err = err
			f.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return f
}

// read reads one stream to its end.
func (f *follower) read(hc *http.Client, req *http.Request) error {
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET /api/v1/events: %s %s", resp.Status, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		e := event{got: time.Now()}
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return fmt.Errorf("event %q: %v", data, err)
		}
		f.mu.Lock()
		f.events = append(f.events, e)
		f.mu.Unlock()
	}
	return fmt.Errorf("the stream ended: %v", sc.Err())
}

// lastErr is how the last connection ended (nil while the first is open).
func (f *follower) lastErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// of are the events of a type (a prefix ending in ".") and subject so far.
func (f *follower) of(typ, subject string) []event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []event
	for _, e := range f.events {
		if (e.Type == typ || strings.HasSuffix(typ, ".") && strings.HasPrefix(e.Type, typ)) && e.Subject == subject {
			out = append(out, e)
		}
	}
	return out
}

// hookPost is one verified post to the webhook receiver.
type hookPost struct {
	from string // the director's address
	ev   event
}

// hooks is a webhook receiver in the client's namespace: it checks each
// post's Ipvsctl-Signature (t=UNIX,v1=HEX: the HMAC-SHA256 of "UNIX.BODY"
// with the key) and keeps the posts, and what it refused.
type hooks struct {
	mu    sync.Mutex
	posts []hookPost
	bad   []string
}

func (p *pair) hooks(addr string, key []byte) *hooks {
	h := &hooks{}
	var ln net.Listener
	var err error
	inNS(p.t, p.net.cli, func() { ln, err = net.Listen("tcp", addr) })
	if err != nil {
		p.t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		from, _, _ := net.SplitHostPort(r.RemoteAddr)
		sig := r.Header.Get("Ipvsctl-Signature")
		var ts, v1 string
		for _, kv := range strings.Split(sig, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "t":
				ts = v
			case "v1":
				v1 = v
			}
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(ts + "."))
		mac.Write(body)
		got, _ := hex.DecodeString(v1)
		var e event
		err := json.Unmarshal(body, &e)
		h.mu.Lock()
		defer h.mu.Unlock()
		if ts == "" || !hmac.Equal(got, mac.Sum(nil)) || err != nil || r.Header.Get("Content-Type") != "application/json" {
			h.bad = append(h.bad, fmt.Sprintf("from %s: signature %q, Content-Type %q, body %s (%v)", from, sig, r.Header.Get("Content-Type"), body, err))
			http.Error(w, "bad signature", http.StatusBadRequest)
			return
		}
		h.posts = append(h.posts, hookPost{from: from, ev: e})
	})}
	go srv.Serve(ln)
	p.t.Cleanup(func() { srv.Close() })
	return h
}

// of are the posts from a director of an event type and subject.
func (h *hooks) of(from, typ, subject string) []event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []event
	for _, p := range h.posts {
		if p.from == from && p.ev.Type == typ && p.ev.Subject == subject {
			out = append(out, p.ev)
		}
	}
	return out
}

func states(evs []event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Fields["state"])
	}
	return out
}

func types(evs []event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// mailsFrom counts the mails with the subject's suffix that a director
// (its address in OpenSMTPD's Received header) sent.
func mailsFrom(mta *testmta.MTA, addr, subject string) int {
	n := 0
	for _, m := range mta.Mail() {
		if strings.Contains(m.Header.Get("Received"), "["+addr+"]") && strings.HasSuffix(m.Header.Get("Subject"), "] "+subject) {
			n++
		}
	}
	return n
}

// TestNotifyPairFailover: a pair of ipvsctl directors with keepalived's
// notify programs, smtp_alert mail to OpenSMTPD and a signed webhook, both
// in the client's namespace. A (priority 200) becomes master; a real
// server's check fails and recovers; A's priority drops to 50 and B takes
// over. Each director's notify programs ran exactly the lines keepalived
// would have (the initial BACKUP too: keepalived's vrrp_init_state runs
// send_instance_notifies on entering BACKUP (init), and ours runs them on
// the Initialize -> Backup transition), and the real server's notify_up
// (its first pass), notify_down and notify_up (its return); a follower of
// each director's /api/v1/events saw those changes as events, in order;
// the MTA has each director's mail of them, the webhook receiver their
// signed events, the same as the stream's.
func TestNotifyPairFailover(t *testing.T) {
	began := time.Now()
	phase := func(what string) {
		t.Logf("%s: %s after the start", what, time.Since(began).Round(100*time.Millisecond))
	}
	p := newPair(t, 2)
	A, B := p.a, p.b
	p.nodes(200, 100)
	B.cmdOut("node", "set", "--allow-replicated-exec") // the notify programs come to B by replication
	phase("the pair's namespaces and nodes")
	script := notifyScript(t)
	logDir := t.TempDir()
	logA, logB := filepath.Join(logDir, "A.log"), filepath.Join(logDir, "B.log")
	// The webhook's key, removed after the directors stop (cleanups run last first).
	key := []byte("vmtest-webhook-key-" + p.net.id)
	keyFile := "/etc/ipvsctl/secrets/vmtest-webhook-" + p.net.id // the guest's overlay: written in RAM
	if err := os.MkdirAll(filepath.Dir(keyFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, append(key, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(keyFile) })
	dA, dB := p.director(A, addrA), p.director(B, addrB)
	dA.env, dB.env = []string{notifyLogEnv + "=" + logA}, []string{notifyLogEnv + "=" + logB}

	cli := labNet + ".2"
	mta := testmta.Start(t, p.net.cli, cli, "example.test", "ops")
	hk := p.hooks(cli+":8088", key)

	// The checked service: a TCP check on rs1's port 9100, which the test
	// opens and closes in rs1's namespace.
	const chkPort = 9100
	rsNS := p.net.rs[0]
	var ln net.Listener
	listen := func() {
		var err error
		inNS(t, rsNS, func() { ln, err = net.Listen("tcp", fmt.Sprintf(":%d", chkPort)) })
		if err != nil {
			t.Fatal(err)
		}
		go func(ln net.Listener) {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}(ln)
	}
	listen()
	t.Cleanup(func() { ln.Close() })
	rsSubject := fmt.Sprintf("-t %s:%d -r 198.18.0.11:%d", vip, chkPort, chkPort)

	doc := withDoc(t, pairDoc(1, true, 0, false, 1), func(m map[string]any) {
		s := m["settings"].(map[string]any)
		for k, v := range vrrpNotify(script) {
			s["redundancy"].(map[string]any)[k] = v
		}
		s["alerts"] = map[string]any{
			"smtp": map[string]any{"server": cli, "to": []string{"ops@example.test"}, "from": "lb@example.test",
				"alert": true, "connect_timeout": 10},
			"webhooks": []any{map[string]any{"url": "http://" + cli + ":8088/hook", "secret_file": keyFile,
				"types": []string{"vrrp.state", "realserver."}, "timeout": 5}}}
		m["services"] = append(m["services"].([]any), map[string]any{"name": "chk", "protocol": "tcp", "address": vip,
			"port": chkPort, "interface": "eth0", "scheduler": "rr",
			// fall 2, 3 s to answer: no spurious down from a slow emulated guest
			// (a 500 ms timeout once failed a live server, at load); a closed
			// port is refused at once, twice in a second.
			"check": map[string]any{"type": "tcp", "interval": 0.5, "timeout": 3, "rise": 1, "fall": 2, "on_failure": "remove"},
			"servers": []any{map[string]any{"name": "rs1", "address": "198.18.0.11",
				"notify_up": []string{script, "up", "rs1"}, "notify_down": []string{script, "down", "rs1"}}}})
	})

	phase("the lab, the MTA and the webhook receiver ready")
	dA.start()
	query := "type=vrrp.state,realserver."
	fA, fB := p.follow(A, addrA, query), p.follow(B, addrB, query)
	A.apply(doc)
	// B starts once A is master: started together, the first whose master
	// down timer ran out would be master (B, once, when A was slower to
	// start its VRRP), then give way, as keepalived does.
	waitFor(t, "A master with the VIP", 60*time.Second, func() bool { return roleOf(A) == "master" && hasVIP(t, A) })
	dB.start()
	settled := func(master, backup *lab) func() bool {
		return func() bool {
			return roleOf(master) == "master" && hasVIP(t, master) && roleOf(backup) == "backup" && !hasVIP(t, backup)
		}
	}
	waitFor(t, "A master with the VIP, B backup without it", 60*time.Second, settled(A, B))
	phase("A master with the VIP, B backup without it")
	rsLines := func(path string) []string { return notifyLines(path, "up", "down") }
	both := func(n int) func() bool {
		return func() bool { return len(rsLines(logA)) >= n && len(rsLines(logB)) >= n }
	}
	waitFor(t, "rs1's first pass on both directors (notify_up)", 30*time.Second, both(1))
	phase("rs1's first pass on both directors (notify_up)")

	// rs1's check fails, then passes again.
	ln.Close()
	waitFor(t, "rs1 down on both (notify_down)", 30*time.Second, both(2))
	listen()
	waitFor(t, "rs1 back on both (notify_up)", 30*time.Second, both(3))
	phase("rs1 back on both (notify_up)")

	// The failover: A's priority drops below B's; B preempts, A goes backup.
	A.cmdOut("node", "set", "--priority", "50")
	waitFor(t, "B master with the VIP, A backup without it", 60*time.Second, settled(B, A))
	phase("B master with the VIP, A backup without it")
	vrrpLines := func(path string) []string { return notifyLines(path, vrrpWords...) }
	waitFor(t, "A's and B's notify programs of the failover", 30*time.Second, func() bool {
		return len(vrrpLines(logA)) >= 6 && len(vrrpLines(logB)) >= 4
	})
	time.Sleep(3 * time.Second) // three advert intervals: a program run twice would be in the logs by now

	wantA := []string{"backup", "notify INSTANCE VI_1 BACKUP 200", "master", "notify INSTANCE VI_1 MASTER 200",
		"backup", "notify INSTANCE VI_1 BACKUP 50"}
	wantB := []string{"backup", "notify INSTANCE VI_1 BACKUP 100", "master", "notify INSTANCE VI_1 MASTER 100"}
	wantRS := []string{"up rs1", "down rs1", "up rs1"}
	for _, c := range []struct {
		who, log  string
		vrrp, rss []string
	}{{"A", logA, wantA, wantRS}, {"B", logB, wantB, wantRS}} {
		if got := vrrpLines(c.log); !slices.Equal(got, c.vrrp) {
			t.Errorf("%s's VRRP notify programs ran:\n  %s\nwant:\n  %s", c.who, strings.Join(got, "\n  "), strings.Join(c.vrrp, "\n  "))
		}
		if got := rsLines(c.log); !slices.Equal(got, c.rss) {
			t.Errorf("%s's notify_up/notify_down ran: %q, want %q", c.who, got, c.rss)
		}
	}

	// The event streams: each change, in order. The lateness printed is the
	// receipt's time minus the event's (the guest's one clock; under
	// emulation); what the daemon bounds is asserted: the event's time is
	// its VRRP machine's transition's.
	for _, c := range []struct {
		who    string
		l      *lab
		f      *follower
		states []string
	}{{"A", A, fA, []string{"backup", "master", "backup"}}, {"B", B, fB, []string{"backup", "master"}}} {
		vr := c.f.of("vrrp.state", "vrrp/ipv4")
		rs := c.f.of("realserver.", rsSubject)
		if got := states(vr); !slices.Equal(got, c.states) {
			t.Errorf("%s's stream: vrrp.state %q, want %q (its last connection: %v)", c.who, got, c.states, c.f.lastErr())
		}
		if got, want := types(rs), []string{"realserver.up", "realserver.down", "realserver.back"}; !slices.Equal(got, want) {
			t.Errorf("%s's stream: %s's events %q, want %q", c.who, rsSubject, got, want)
		}
		var view struct {
			Redundancy struct {
				Transitions []struct {
					At time.Time `json:"at"`
					To string    `json:"to"`
				} `json:"transitions"`
			} `json:"redundancy"`
		}
		if err := json.Unmarshal([]byte(c.l.cmdOut("node", "show", "--json")), &view); err != nil {
			t.Fatal(err)
		}
		tr := view.Redundancy.Transitions
		var late []string
		for i, e := range vr {
			if i >= len(tr) || tr[i].To != e.Fields["state"] {
				t.Errorf("%s: event %d (%s) has no transition to match in node show: %+v", c.who, e.ID, e.Fields["state"], tr)
				continue
			}
			if d := e.Time.Sub(tr[i].At).Abs(); d > time.Second {
				t.Errorf("%s: the %s event's time is %s from the transition's", c.who, e.Fields["state"], d)
			}
		}
		for _, e := range append(vr, rs...) {
			late = append(late, fmt.Sprintf("%s %s %s", e.Type, e.Fields["state"], e.got.Sub(e.Time).Round(time.Millisecond)))
		}
		t.Logf("%s's stream, each event's lateness (receipt minus its time): %s", c.who, strings.Join(late, "; "))
	}

	// The mail (smtp_alert), from each director: its VRRP change and rs1's DOWN and UP.
	rsMail := fmt.Sprintf("Realserver [198.18.0.11]:tcp:%d of virtual server [%s]:tcp:%d - ", chkPort, vip, chkPort)
	// keepalived mails a VRRP state only when it differs from the last
	// mailed (last_email_state): A mailed BACKUP, MASTER, BACKUP; B BACKUP, MASTER.
	vrrpMail := "VRRP Instance VI_1 - Entering "
	want := map[string]int{addrA + " " + vrrpMail + "BACKUP state": 2, addrA + " " + vrrpMail + "MASTER state": 1,
		addrB + " " + vrrpMail + "BACKUP state": 1, addrB + " " + vrrpMail + "MASTER state": 1,
		addrA + " " + rsMail + "DOWN": 1, addrA + " " + rsMail + "UP": 2, addrB + " " + rsMail + "DOWN": 1, addrB + " " + rsMail + "UP": 2}
	mailed := func() map[string]int {
		got := map[string]int{}
		for k := range want {
			addr, subject, _ := strings.Cut(k, " ")
			got[k] = mailsFrom(mta, addr, subject)
		}
		return got
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mails by director and subject: %v, want %v", mailed(), want)
			for _, m := range mta.Mail() {
				t.Logf("mail: %s | Received: %s", m.Header.Get("Subject"), m.Header.Get("Received"))
			}
		}
	})
	waitFor(t, "the mails of the VRRP changes and of rs1", 30*time.Second, func() bool { return maps.Equal(mailed(), want) })
	phase(fmt.Sprintf("the MTA holds %d mails", len(mta.Mail())))

	// The webhook: each event signed, the same as the stream's.
	waitFor(t, "the webhook's posts", 30*time.Second, func() bool {
		return len(hk.of(addrA, "vrrp.state", "vrrp/ipv4")) >= 3 && len(hk.of(addrB, "vrrp.state", "vrrp/ipv4")) >= 2 &&
			len(hk.of(addrA, "realserver.back", rsSubject)) >= 1 && len(hk.of(addrB, "realserver.back", rsSubject)) >= 1
	})
	hk.mu.Lock()
	if len(hk.bad) > 0 {
		t.Errorf("the webhook receiver refused %d posts:\n%s", len(hk.bad), strings.Join(hk.bad, "\n"))
	}
	hk.mu.Unlock()
	for _, c := range []struct {
		who, addr string
		f         *follower
	}{{"A", addrA, fA}, {"B", addrB, fB}} {
		want := append(c.f.of("vrrp.state", "vrrp/ipv4"), c.f.of("realserver.", rsSubject)...)
		for _, e := range want {
			posted := hk.of(c.addr, e.Type, e.Subject)
			if !slices.ContainsFunc(posted, func(p event) bool {
				return p.ID == e.ID && p.Time.Equal(e.Time) && p.Fields["state"] == e.Fields["state"]
			}) {
				t.Errorf("%s: the stream's event %d (%s %s) was not posted to the webhook: %+v", c.who, e.ID, e.Type, e.Fields["state"], posted)
			}
		}
	}
}
