package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/health"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/events"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/metrics"
)

// notifySocket is a unixgram socket standing for systemd's: what the
// daemon tells it, datagram by datagram.
type notifySocket struct {
	t    *testing.T
	path string
	conn *net.UnixConn
}

func listenNotify(t *testing.T) *notifySocket {
	path := filepath.Join(t.TempDir(), "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &notifySocket{t: t, path: path, conn: c}
}

// next is the next datagram (within 10 s).
func (n *notifySocket) next() string {
	n.t.Helper()
	buf := make([]byte, 4096)
	n.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	k, err := n.conn.Read(buf)
	if err != nil {
		n.t.Fatalf("read the notify socket: %v", err)
	}
	return string(buf[:k])
}

// within is the next datagram if one comes within d, else "".
func (n *notifySocket) within(d time.Duration) string {
	buf := make([]byte, 4096)
	n.conn.SetReadDeadline(time.Now().Add(d))
	k, err := n.conn.Read(buf)
	if err != nil {
		return ""
	}
	return string(buf[:k])
}

// until reads datagrams until one has want (at most 50).
func (n *notifySocket) until(want string) string {
	n.t.Helper()
	var seen []string
	for range 50 {
		if m := n.next(); strings.Contains(m, want) {
			return m
		} else {
			seen = append(seen, m)
		}
	}
	n.t.Fatalf("no datagram with %q; got %q", want, seen)
	return ""
}

// The watchdog with real http checks against loopback servers, on a fake
// clock: one server answers, the other holds its request. Readiness waits
// for the held check's first result (systemd is told what it waits for,
// /readyz answers 503 naming how many checks have not run); once the held
// round is late by more than its interval the checker.late event and the
// metrics say so, the server's status carries its lateness; when the
// server answers, checker.caught_up, then checker.ready, READY=1 and a 200.
func TestWatchdogLateRoundReadinessAndSdNotify(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st := testStore(t, ctx)

	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer ok.Close()
	release := make(chan struct{})
	held := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer held.Close()
	defer close(release)
	var servers []string
	for i, u := range []string{ok.URL, held.URL} {
		host, port, _ := net.SplitHostPort(strings.TrimPrefix(u, "http://"))
		servers = append(servers, fmt.Sprintf(`{"name":"r%d","address":%q,"port":%s}`, i+1, host, port))
	}
	// timeout 30 s: the held check is never cut while the test runs; warmup
	// 0.2 s: both start after the slack (50 ms: never at the runner's first
	// look) and by 200 ms, which the first step passes; r1's later rounds
	// are then never more than 0.25 s behind, never late.
	doc := fmt.Sprintf(`{"services": [{"name": "web", "address": "198.18.0.100", "port": 80, "forwarding": "nat",
  "check": {"type": "http", "path": "/", "interval": 1, "timeout": 30, "warmup": 0.2, "rise": 1, "fall": 1},
  "servers": [%s]}]}`, strings.Join(servers, ","))
	state, err := ipvsmgr.DecodeState(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	k := fakekernel.New()
	open := func() (*server.KernelConn, error) { return &server.KernelConn{Kernel: k, Close: func() {}}, nil }
	// Stored before the daemon starts, as at a boot.
	if _, err := applyState(ctx, server.New(server.Config{Store: st, OpenKernel: open}), server.Actor{Name: "t", Via: "test"}, state, "test"); err != nil {
		t.Fatal(err)
	}

	evs, err := events.New(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	core := server.New(server.Config{Store: st, Events: evs, OpenKernel: open})
	d := New(core, st, slog.New(slog.DiscardHandler))
	d.Interval, d.Poll, d.Snapshot = time.Hour, time.Hour, 50*time.Millisecond
	clk := health.NewFakeClock(time.Unix(1_800_000_000, 0))
	d.HealthClock = clk
	sock := listenNotify(t)
	d.NotifySocket = sock.path
	m := metrics.New(core)
	web := httptest.NewServer(httpd.LocalHandler(httpd.Options{Core: core}))
	defer web.Close()
	dctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	stopped := false
	stopDaemon := func() {
		if !stopped {
			stopped = true
			stop()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
	defer stopDaemon()

	if m := sock.next(); m != "STATUS=waiting for 2 of 2 checks to run once" {
		t.Errorf("systemd told first %q", m)
	}
	status := func(name string) *health.Status {
		for _, s := range d.sk.health.Status() {
			if s.ServerName == name {
				return &s
			}
		}
		t.Fatalf("no status for %s", name)
		return nil
	}
	// step moves the clock on by dt and waits for r1's result of now.
	step := func(dt time.Duration) {
		t.Helper()
		clk.Advance(dt)
		for ctx.Err() == nil && !status("r1").LastCheck.Equal(clk.Now()) {
			time.Sleep(2 * time.Millisecond)
		}
		if ctx.Err() != nil {
			t.Fatalf("r1's check did not give a result: now %v, r1 %+v", clk.Now(), *status("r1"))
		}
	}
	step(200 * time.Millisecond) // both start; r2's request is held
	// The watchdog looks every 100 ms of the fake clock, re-arming its timer
	// after each look: the clock moves on until it has looked since r1's
	// result (at most 5 times: r1's rounds stay within a second of due).
	told := ""
	for range 5 {
		clk.Advance(100 * time.Millisecond)
		if told = sock.within(time.Second); told != "" {
			break
		}
	}
	if told != "STATUS=waiting for 1 of 2 checks to run once" {
		t.Errorf("with r1 checked systemd is told %q", told)
	}
	code, body := get(t, web.URL+"/readyz")
	if code != http.StatusServiceUnavailable || body.Ready || body.NotRun != 1 || body.Checks != 2 || !strings.Contains(body.Waiting, "1 of 2 checks") {
		t.Errorf("/readyz with r2 held: %d %+v", code, body)
	}

	// r2 began by 200 ms; its round is due at its timeout (30 s
	// after), and late once more than its interval (1 s) past that.
	for range 32 {
		step(time.Second)
	}
	for ctx.Err() == nil && core.CheckerStatus().Late == 0 {
		clk.Advance(0)
		time.Sleep(2 * time.Millisecond)
	}
	cs := core.CheckerStatus()
	if cs.Late != 1 || cs.WorstTarget != strings.TrimPrefix(held.URL, "http://") || cs.WorstLate <= 1 || cs.LateRounds != 1 || cs.Ready {
		t.Errorf("checker status with r2 late: %+v", cs)
	}
	late := waitEvent(t, ctx, core, events.CheckerLate)
	if late.Fields["target"] != cs.WorstTarget || late.Fields["type"] != "http" || late.Fields["late"] != "1" {
		t.Errorf("checker.late event: %+v", late)
	}
	if s := status("r2"); s.Late <= time.Second {
		t.Errorf("r2's status: late %v", s.Late)
	}
	v, err := core.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var r1, r2 *server.HealthStatus
	for _, s := range v.Services {
		for _, srv := range s.Servers {
			switch srv.Health.Name {
			case "r1":
				r1 = srv.Health
			case "r2":
				r2 = srv.Health
			}
		}
	}
	if r1 == nil || r1.LastCheck == nil || r1.LastCheckAge == nil || r1.Late != 0 {
		t.Errorf("r1 in the status: %+v", r1)
	}
	if r2 == nil || r2.LastCheck != nil || r2.Late <= 1 {
		t.Errorf("r2 in the status: %+v", r2)
	}
	if v.Checker == nil || v.Checker.Late != 1 {
		t.Errorf("the status's checker: %+v", v.Checker)
	}
	exp := scrape(t, m)
	for _, want := range []string{"ipvsctl_check_rounds_late_total 1", "ipvsctl_checks_late 1", "ipvsctl_checks_ready 0", "ipvsctl_checks_not_run 1"} {
		if !strings.Contains(exp, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	if !strings.Contains(exp, "ipvsctl_backend_check_last_run_timestamp_seconds{") {
		t.Error("metrics lack r1's last run")
	}

	release <- struct{}{} // r2 answers: its held round, then one at once
	for ctx.Err() == nil && core.CheckerStatus().NotRun != 0 {
		time.Sleep(2 * time.Millisecond)
	}
	// Each step is a round of r1 (on time) and at least one look of the
	// watchdog: a look after r2's result tells caught_up and readiness.
	for i := 0; i < 5 && !(core.CheckerStatus().Ready && hasEvent(t, ctx, core, events.CheckerCaughtUp)); i++ {
		step(time.Second)
	}
	caught := waitEvent(t, ctx, core, events.CheckerCaughtUp)
	if caught.Fields["late_rounds"] != "1" {
		t.Errorf("checker.caught_up: %+v", caught)
	}
	waitEvent(t, ctx, core, events.CheckerReady)
	if m := sock.until("READY=1"); !strings.HasPrefix(m, "READY=1\nSTATUS=ready: every check has run once (2 checks)") {
		t.Errorf("systemd told %q", m)
	}
	code, body = get(t, web.URL+"/readyz")
	if code != http.StatusOK || !body.Ready || body.NotRun != 0 || body.Late != 0 || body.ReadyAt == nil {
		t.Errorf("/readyz once ready: %d %+v", code, body)
	}
	if !strings.Contains(scrape(t, m), "ipvsctl_checks_ready 1\n") {
		t.Error("metrics: not ready")
	}
	stopDaemon()
	if m := sock.next(); m != "STOPPING=1" {
		t.Errorf("at the stop systemd told %q", m)
	}
}

// A director without checks is ready once its first reconcile is done.
func TestReadyWithoutChecksAfterTheFirstReconcile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := testStore(t, ctx)
	k := fakekernel.New()
	core := server.New(server.Config{Store: st, OpenKernel: openFake(k, nil)})
	d := New(core, st, slog.New(slog.DiscardHandler))
	d.Interval, d.Poll = time.Hour, time.Hour
	sock := listenNotify(t)
	d.NotifySocket = sock.path
	if cs := core.CheckerStatus(); cs.Ready {
		t.Fatalf("ready before the daemon runs: %+v", cs)
	}
	dctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	defer func() {
		stop()
		<-done
	}()
	if m := sock.until("READY=1"); m != "READY=1\nSTATUS=ready: the first reconcile is done (no checks)" {
		t.Errorf("systemd told %q", m)
	}
	if _, ok := d.sk.LastReconcile(); !ok {
		t.Error("ready before the first reconcile")
	}
	if cs := core.CheckerStatus(); !cs.Ready || cs.Checks != 0 {
		t.Errorf("checker status: %+v", cs)
	}
}

func get(t *testing.T, url string) (int, server.CheckerStatus) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st server.CheckerStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, st
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// waitEvent is the first event of type typ the core's log has (within ctx).
// hasEvent says whether the core's log has an event of type typ.
func hasEvent(t *testing.T, ctx context.Context, core *server.Core, typ string) bool {
	t.Helper()
	evs, err := core.Events().Since(ctx, 0, events.Filter{Types: []string{typ}})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs) > 0
}

func waitEvent(t *testing.T, ctx context.Context, core *server.Core, typ string) events.Event {
	t.Helper()
	for ctx.Err() == nil {
		evs, err := core.Events().Since(ctx, 0, events.Filter{Types: []string{typ}})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > 0 {
			return evs[0]
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %s event", typ)
	return events.Event{}
}

// A director that cannot become ready (here: no kernel IPVS, so no first
// reconcile) tells systemd it has started once it has waited startedBound,
// once, saying what it waits for; before that only STATUS=. Its readiness
// stays false.
func TestSystemdToldStartedWhenNotReadyInTime(t *testing.T) {
	ctx := context.Background()
	st := testStore(t, ctx)
	core := server.New(server.Config{Store: st, OpenKernel: func() (*server.KernelConn, error) {
		return nil, errors.New("no ip_vs")
	}})
	d := New(core, st, slog.New(slog.DiscardHandler))
	sock := listenNotify(t)
	d.NotifySocket = sock.path
	if d.watchOnce(ctx, time.Minute) {
		t.Fatal("ready without a reconcile")
	}
	if m := sock.next(); m != "STATUS=waiting for the first reconcile" {
		t.Fatalf("before the bound, systemd told %q", m)
	}
	if d.watchOnce(ctx, startedBound) {
		t.Fatal("ready without a reconcile")
	}
	if m := sock.next(); m != "READY=1\nSTATUS=waiting for the first reconcile" {
		t.Fatalf("at the bound, systemd told %q", m)
	}
	d.watchOnce(ctx, 2*startedBound)
	sock.conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if k, err := sock.conn.Read(make([]byte, 512)); err == nil {
		t.Fatalf("told again: %d bytes", k)
	}
	if cs := core.CheckerStatus(); cs.Ready {
		t.Errorf("ready: %+v", cs)
	}
}
