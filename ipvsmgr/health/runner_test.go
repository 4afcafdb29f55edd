package health

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

// script is a checker whose results the test sets per target.
type script struct {
	mu        sync.Mutex
	results   map[string]Result
	hang      map[string]bool
	calls     map[string]int
	cancelled map[string]int
}

func newScript() *script {
	return &script{results: map[string]Result{}, hang: map[string]bool{}, calls: map[string]int{}, cancelled: map[string]int{}}
}

func (s *script) set(target string, r Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results[target] = r
}

func (s *script) check(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	s.mu.Lock()
	target := spec.Target.String()
	s.calls[target]++
	r, ok := s.results[target]
	hang := s.hang[target]
	s.mu.Unlock()
	if hang {
		<-ctx.Done()
		s.mu.Lock()
		s.cancelled[target]++
		s.mu.Unlock()
		return fail("cancelled")
	}
	if !ok {
		return pass("connected")
	}
	return r
}

func (s *script) count(target string) (calls, cancelled int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[target], s.cancelled[target]
}

type harness struct {
	t       *testing.T
	r       *Runner
	clk     *FakeClock
	s       *script
	results chan struct{}

	mu     sync.Mutex
	events []Event
}

func newHarness(t *testing.T, d *ipvsmgr.Desired) *harness { return newHarnessWith(t, d, nil) }

// newHarnessWith runs check (nil: the script's) for the runner.
func newHarnessWith(t *testing.T, d *ipvsmgr.Desired, check func(context.Context, *ipvsmgr.CheckSpec) Result) *harness {
	h := &harness{t: t, clk: NewFakeClock(time.Unix(1_800_000_000, 0)), s: newScript(), results: make(chan struct{}, 1000)}
	if check == nil {
		check = h.s.check
	}
	h.r = NewRunner(Config{Check: check, Clock: h.clk, Notify: func(e Event) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.events = append(h.events, e)
	}})
	h.r.afterResult = func() { h.results <- struct{}{} }
	h.r.Update(d.Checks)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return h
}

// step moves the clock on by d and waits for n results.
func (h *harness) step(d time.Duration, n int) {
	h.t.Helper()
	h.clk.Advance(d)
	for range n {
		select {
		case <-h.results:
		case <-time.After(5 * time.Second):
			h.t.Fatalf("a check result did not come within 5 s")
		}
	}
	select {
	case <-h.results:
		h.t.Fatal("more results than expected")
	case <-time.After(20 * time.Millisecond):
	}
}

// takeEvents returns the events since the last call, as "server from->to reason" lines.
func (h *harness) takeEvents() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.events {
		line := e.ServerName + " " + e.From.String() + "->" + e.To.String() + " " + e.Reason
		if e.Health.WeightSet {
			line += " weight " + strconv.Itoa(int(e.Health.Weight))
		}
		if e.Fault != "" {
			line += " fault " + e.Fault
		}
		if e.Flapping {
			line += " flapping"
		}
		out = append(out, line)
	}
	h.events = nil
	return out
}

func (h *harness) status(server string) Status {
	for _, s := range h.r.Status() {
		if s.ServerName == server {
			return s
		}
	}
	h.t.Fatalf("no status for %s", server)
	return Status{}
}

func compile(t *testing.T, doc string) *ipvsmgr.Desired {
	t.Helper()
	st, err := ipvsmgr.DecodeState(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ipvsmgr.Compile(st)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func wantEvents(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("events:\n got %q\nwant %q", got, want)
	}
}

const oneServer = `{"services":[{"name":"web","address":"198.18.0.100","port":80,
 "check":{"type":"tcp","interval":1,"rise":2,"fall":3},
 "servers":[{"name":"r1","address":"198.18.0.11"}]}]}`

func TestRiseAndFall(t *testing.T) {
	h := newHarness(t, compile(t, oneServer))
	const r1 = "198.18.0.11:80"
	if p := h.status("r1").Phase(); p != "unchecked" {
		t.Errorf("before the first check: %s", p)
	}
	h.step(time.Second, 1)
	wantEvents(t, h.takeEvents(), "r1 unknown->up connected")
	h.s.set(r1, fail("connection refused"))
	h.step(time.Second, 1)
	h.step(time.Second, 1)
	if p := h.status("r1").Phase(); p != "going down 2/3" {
		t.Errorf("after two failures: %s", p)
	}
	wantEvents(t, h.takeEvents())
	h.step(time.Second, 1)
	wantEvents(t, h.takeEvents(), "r1 up->down connection refused")
	st := h.status("r1")
	if st.State != ipvsmgr.HealthDown || st.Reason != "connection refused" || !st.Since.Equal(h.clk.Now()) {
		t.Errorf("status after the fall: %+v", st)
	}
	h.s.set(r1, pass("connected"))
	h.step(time.Second, 1)
	if p := h.status("r1").Phase(); p != "going up 1/2" {
		t.Errorf("after one pass: %s", p)
	}
	wantEvents(t, h.takeEvents())
	h.step(time.Second, 1)
	wantEvents(t, h.takeEvents(), "r1 down->up connected")
	if v := h.r.View().Servers; len(v) != 1 {
		t.Errorf("view: %v", v)
	}
}

// A failure is reported at once; only fall of them take the server out.
// A checker fault counts neither way.
func TestFaultIsNotDown(t *testing.T) {
	h := newHarness(t, compile(t, oneServer))
	const r1 = "198.18.0.11:80"
	h.step(time.Second, 1)
	h.takeEvents()
	h.s.set(r1, fault("out of file descriptors"))
	for range 5 {
		h.step(time.Second, 1)
	}
	wantEvents(t, h.takeEvents(), "r1 up->up out of file descriptors fault out of file descriptors")
	if st := h.status("r1"); st.State != ipvsmgr.HealthUp || st.Fault != "out of file descriptors" {
		t.Errorf("status during a fault: %+v", st)
	}
	h.s.set(r1, pass("connected"))
	h.step(time.Second, 1)
	wantEvents(t, h.takeEvents(), "r1 up->up connected")
}

func TestFlapping(t *testing.T) {
	d := compile(t, strings.Replace(oneServer, `"rise":2,"fall":3`, `"rise":1,"fall":1`, 1))
	h := newHarness(t, d)
	const r1 = "198.18.0.11:80"
	h.step(time.Second, 1) // up
	for i := range 3 {
		if i%2 == 0 {
			h.s.set(r1, fail("HTTP 503"))
		} else {
			h.s.set(r1, pass("HTTP 200"))
		}
		h.step(time.Second, 1)
	}
	wantEvents(t, h.takeEvents(), "r1 unknown->up connected", "r1 up->down HTTP 503", "r1 down->up HTTP 200", "r1 up->down HTTP 503 flapping")
	if !h.status("r1").Flapping {
		t.Error("status does not say flapping")
	}
	// Quiet for longer than the window: no longer flapping.
	h.clk.Advance(2 * time.Minute)
	for range 200 {
		if !h.status("r1").Flapping {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if h.status("r1").Flapping {
		t.Error("still flapping after a quiet window")
	}
}

func TestSlowStartRamp(t *testing.T) {
	d := compile(t, `{"services":[{"name":"web","address":"198.18.0.100","port":80,
	 "check":{"type":"tcp","interval":1,"rise":1,"fall":1,"slow_start":10},
	 "servers":[{"name":"r1","address":"198.18.0.11","weight":10}]}]}`)
	h := newHarness(t, d)
	var weights []uint32
	weight := func() {
		s := h.r.View().Servers[d.Checks[0].Ref]
		w := uint32(10)
		if s.WeightSet {
			w = s.Weight
		}
		weights = append(weights, w)
	}
	h.step(time.Second, 1)
	weight()
	for range 11 {
		h.step(time.Second, 1)
		weight()
	}
	if want := []uint32{1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10}; !slices.Equal(weights, want) {
		t.Errorf("ramp %v, want %v", weights, want)
	}
	ev := h.takeEvents()
	if len(ev) != 10 || ev[0] != "r1 unknown->up connected weight 1" || ev[9] != "r1 up->up connected" {
		t.Errorf("ramp events (one per weight change): %q", ev)
	}
	// Down and back: the ramp starts again.
	h.s.set("198.18.0.11:80", fail("connection refused"))
	h.step(time.Second, 1)
	h.s.set("198.18.0.11:80", pass("connected"))
	h.step(time.Second, 1)
	if s := h.r.View().Servers[d.Checks[0].Ref]; !s.WeightSet || s.Weight != 1 {
		t.Errorf("back up: %+v, want weight 1", s)
	}
}

func TestAgentAndDynamicWeights(t *testing.T) {
	d := compile(t, `{"services":[{"name":"web","address":"198.18.0.100","port":80,
	 "check":{"type":"agent","port":9999,"interval":1,"rise":1,"fall":1},
	 "servers":[{"name":"r1","address":"198.18.0.11","weight":8}]}]}`)
	h := newHarness(t, d)
	r := pass("agent: 75%")
	r.Percent = 75
	h.s.set("198.18.0.11:9999", r)
	h.step(time.Second, 1)
	if s := h.r.View().Servers[d.Checks[0].Ref]; s.State != ipvsmgr.HealthUp || s.Weight != 6 {
		t.Errorf("75%% of 8: %+v", s)
	}
	h.s.set("198.18.0.11:9999", pass("agent: up")) // no percentage: the last one holds
	h.step(time.Second, 1)
	r.Percent = 0
	h.s.set("198.18.0.11:9999", r)
	h.step(time.Second, 1)
	wantEvents(t, h.takeEvents(), "r1 unknown->up agent: 75% weight 6", "r1 up->up agent: 75% weight 0")
}

// The same check of the same real server in two services runs once; both
// services hear of its changes.
func TestSharedTarget(t *testing.T) {
	d := compile(t, `{"services":[
	 {"name":"a","address":"198.18.0.100","port":80,"check":{"type":"tcp","interval":1},"servers":[{"name":"r1","address":"198.18.0.11"}]},
	 {"name":"b","address":"198.18.0.101","port":80,"check":{"type":"tcp","interval":1},"servers":[{"name":"r1b","address":"198.18.0.11"}]}]}`)
	h := newHarness(t, d)
	for range 3 {
		h.step(time.Second, 1)
	}
	if calls, _ := h.s.count("198.18.0.11:80"); calls != 3 {
		t.Errorf("checked %d times in 3 intervals, want 3", calls)
	}
	ev := h.takeEvents()
	slices.Sort(ev)
	wantEvents(t, ev, "r1 unknown->up connected", "r1b unknown->up connected")
}

// An edit that does not change a server's check keeps its health; a changed
// check starts over; a removed server's checks stop, a run under way too.
func TestUpdateKeepsHealthAndStopsRemoved(t *testing.T) {
	doc := `{"services":[{"name":"web","address":"198.18.0.100","port":80,"scheduler":"wlc",
	 "check":{"type":"tcp","interval":1,"rise":1,"fall":1},
	 "servers":[{"name":"r1","address":"198.18.0.11"},{"name":"r2","address":"198.18.0.12"},{"name":"r3","address":"198.18.0.13"}]}]}`
	h := newHarness(t, compile(t, doc))
	h.step(time.Second, 3)
	h.takeEvents()
	edited := strings.Replace(doc, `"scheduler":"wlc"`, `"scheduler":"rr"`, 1)
	edited = strings.Replace(edited, `{"name":"r1","address":"198.18.0.11"}`, `{"name":"r1","address":"198.18.0.11","weight":5}`, 1)
	edited = strings.Replace(edited, `{"name":"r2","address":"198.18.0.12"}`, `{"name":"r2","address":"198.18.0.12","check":{"port":8080}}`, 1)
	edited = strings.Replace(edited, `,{"name":"r3","address":"198.18.0.13"}`, ``, 1)
	h.s.mu.Lock()
	h.s.hang["198.18.0.13:80"] = true
	h.s.mu.Unlock()
	h.step(time.Second, 2) // r3's run hangs
	for range 200 {
		if calls, _ := h.s.count("198.18.0.13:80"); calls == 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.r.Update(compile(t, edited).Checks)
	if st := h.status("r1"); st.State != ipvsmgr.HealthUp || st.Passes != 2 {
		t.Errorf("r1 after an unrelated edit: %s, %d passes; want up, kept", st.Phase(), st.Passes)
	}
	if st := h.status("r2"); st.State != ipvsmgr.HealthUnknown || st.Target != "198.18.0.12:8080" {
		t.Errorf("r2 with a new check: %s %s; want unchecked on :8080", st.Phase(), st.Target)
	}
	for range 200 {
		if _, c := h.s.count("198.18.0.13:80"); c == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, c := h.s.count("198.18.0.13:80"); c != 1 {
		t.Error("the hung run of a removed server was not cancelled")
	}
	before, _ := h.s.count("198.18.0.13:80")
	h.step(time.Second, 2) // r1, and r2's first run
	h.step(time.Second, 2)
	if after, _ := h.s.count("198.18.0.13:80"); after != before {
		t.Errorf("a removed server was checked %d more times", after-before)
	}
	for _, s := range h.r.Status() {
		if s.ServerName == "r3" {
			t.Error("a removed server is still listed")
		}
	}
}

// Checks through to the kernel: the runner's view, laid over the desired
// state by the plan, takes a dead server out, adds the sorry server when
// fewer than quorum are up, and removes it when they come back; a server
// forced up stays in whatever its checks say.
func TestViewThroughTheReconcile(t *testing.T) {
	doc := `{"services":[{"name":"web","address":"198.18.0.100","port":80,
	 "check":{"type":"tcp","interval":1,"rise":1,"fall":2,"on_failure":"remove"},
	 "sorry_server":{"address":"198.18.0.50"},"quorum":3,
	 "servers":[{"name":"r1","address":"198.18.0.11"},{"name":"r2","address":"198.18.0.12"},
	            {"name":"r3","address":"198.18.0.13","health":"up"}]}]}`
	d := compile(t, doc)
	h := newHarness(t, d)
	k := fakekernel.New()
	rec := &ipvsmgr.Reconciler{Kernel: k, Ledger: &fakekernel.Ledger{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	reconcile := func() []string {
		d.Health = h.r.View()
		if _, err := rec.Reconcile(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		return k.Ops()
	}
	h.s.set("198.18.0.13:80", fail("connection refused"))
	// Before any result: r1 and r2 are out; r3 (forced up) and the sorry server are in.
	wantEvents(t, reconcile(), "ipvsadm -A -t 198.18.0.100:80 -s wlc",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.13:80 -g -w 1",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.50:80 -g -w 1")
	h.step(time.Second, 3)
	wantEvents(t, reconcile(), "ipvsadm -d -t 198.18.0.100:80 -r 198.18.0.50:80",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 1")
	h.s.set("198.18.0.11:80", fail("connection refused"))
	h.step(time.Second, 3)
	wantEvents(t, reconcile()) // one failure of two: still in
	h.step(time.Second, 3)
	wantEvents(t, reconcile(), "ipvsadm -d -t 198.18.0.100:80 -r 198.18.0.11:80",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.50:80 -g -w 1")
	h.s.set("198.18.0.11:80", pass("connected"))
	h.step(time.Second, 3)
	wantEvents(t, reconcile(), "ipvsadm -d -t 198.18.0.100:80 -r 198.18.0.50:80",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1")
}

// TestFastAndDownIntervals: after a failure while a server is in (and a
// pass while it is out) the next check comes at fast_interval; while it is
// out, at down_interval.
func TestFastAndDownIntervals(t *testing.T) {
	h := newHarness(t, compile(t, `{"services":[{"name":"web","address":"198.18.0.100","port":80,
 "check":{"type":"tcp","interval":10,"fast_interval":1,"down_interval":30,"rise":2,"fall":3},
 "servers":[{"name":"r1","address":"198.18.0.11"}]}]}`))
	const r1 = "198.18.0.11:80"
	h.step(10*time.Second, 1)
	wantEvents(t, h.takeEvents(), "r1 unknown->up connected")
	h.s.set(r1, fail("connection refused"))
	h.step(10*time.Second, 1) // the first failure, at the interval
	h.step(time.Second, 1)    // the retries come a fast interval apart
	h.step(time.Second, 1)
	wantEvents(t, h.takeEvents(), "r1 up->down connection refused")
	h.step(29*time.Second, 0) // out: nothing before the down interval
	h.s.set(r1, pass("connected"))
	h.step(time.Second, 1)
	h.step(time.Second, 1) // back at the fast interval
	wantEvents(t, h.takeEvents(), "r1 down->up connected")
	h.step(9*time.Second, 0)
	h.step(time.Second, 1)
	if calls, _ := h.s.count(r1); calls != 7 {
		t.Errorf("%d checks, want 7", calls)
	}
}

// The run heap gives its probes back soonest first, however they came,
// with pops between the pushes.
func TestProbeHeapPopsSoonestFirst(t *testing.T) {
	var h probeHeap
	at := map[*probe]int64{}
	var waiting []int64
	pop := func() {
		t.Helper()
		slices.Sort(waiting)
		p := h.pop()
		if at[p] != waiting[0] {
			t.Fatalf("popped a probe at %d, the soonest is at %d", at[p], waiting[0])
		}
		waiting = waiting[1:]
	}
	for i := range 1000 {
		p := &probe{key: strconv.Itoa(i)}
		at[p] = rand.Int64N(500) // many equal times among them
		waiting = append(waiting, at[p])
		h.push(queued{at[p], p})
		if i%7 == 0 {
			pop()
		}
	}
	for len(waiting) > 0 {
		pop()
	}
	if len(h) != 0 {
		t.Fatalf("%d left on the heap", len(h))
	}
}
