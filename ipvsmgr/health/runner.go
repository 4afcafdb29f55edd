package health

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Event is a change of one real server's health in one service: its state,
// the weight the checks give it, or a checker fault starting or ending.
type Event struct {
	Ref         ipvsmgr.ServerRef
	ServiceName string
	ServerName  string
	At          time.Time
	From, To    ipvsmgr.HealthState // equal for a weight or fault change
	// Health is what the plan should now use for the server.
	Health ipvsmgr.ServerHealth
	// Reason is the result that made the change ("HTTP 503", "exit status 3").
	Reason string
	// Fault is set while the check cannot run at all.
	Fault    string
	Flapping bool
	// Ramp says the weight is a step of the slow-start ramp (a change worth
	// applying, not one worth keeping in the history).
	Ramp bool
	// Quiesce says a failure leaves the server in at weight 0 (on_failure
	// quiesce) rather than taking it out.
	Quiesce bool
}

// Config sets a Runner up. Every field is optional.
type Config struct {
	// Check runs one check; nil: a Checker's Run.
	Check func(ctx context.Context, spec *ipvsmgr.CheckSpec) Result
	// OnCheck is called after every check run, with the run's result
	// (metrics); never with the runner's lock held.
	OnCheck func(spec *ipvsmgr.CheckSpec, r Result)
	// Notify is told of every change, from the runner's goroutines and
	// never with its lock held; it should return quickly (queue the event
	// and wake the reconcile).
	Notify func(Event)
	// Workers bounds the checks running at once (default 512).
	Workers int
	Clock   Clock
	Log     *slog.Logger
	// A server that changed state FlapCount times (default 4) within
	// FlapWindow (default 60 s, at least ten intervals) is shown flapping.
	FlapWindow time.Duration
	FlapCount  int
}

// The checks due within a slack are started together, a little early, so
// that a thousand checks a second wake the scheduler (and the tcp checkers)
// twenty times rather than a thousand: a twentieth of a check's interval,
// between minSlack and maxSlack.
const (
	minSlack = 10 * time.Millisecond
	maxSlack = 50 * time.Millisecond
)

// slack is how early p may start to join a batch.
func (p *probe) slack() time.Duration {
	return min(max(p.spec.Interval/20, minSlack), maxSlack)
}

// Runner runs every check of a director on one scheduler: a heap of the
// next run times, bounded concurrency, one run per distinct check however
// many services share the target.
type Runner struct {
	cfg   Config
	check func(ctx context.Context, spec *ipvsmgr.CheckSpec) Result
	clock Clock
	// realTime: clock is the system's, so the tcp checkers' times (their
	// deadlines, a result's duration) are the runner's too, and a batch's
	// checks need no clock reading each.
	realTime bool
	wake     chan struct{}

	mu      sync.Mutex
	probes  map[string]*probe
	members map[ipvsmgr.ServerRef]*member
	queue   probeHeap
	epoch   time.Time // the heap's times count from it

	// asleep: Run waits for its timer, set for wakeAt (zero: none) or a
	// poke; a result due before then pokes it.
	asleep bool
	wakeAt time.Time

	lateRounds uint64 // rounds found late (watchdog.go)
	startDelay Delays // how late each check started

	afterResult func() // tests: called after each result is recorded
	noConnector bool   // tests and benchmarks: tcp checks dial
	noSynProbe  bool   // tests and benchmarks: tcp checks connect
}

// probe is one distinct check (spec) and its state machine; members are the
// (service, server) pairs that share it.
type probe struct {
	key     string
	spec    ipvsmgr.CheckSpec
	state   ipvsmgr.HealthState
	since   time.Time
	reason  string // of the last transition
	passes  int    // in a row
	fails   int    // in a row
	last    Result
	lastAt  time.Time
	fault   string
	dynamic int // exec dynamic weight, -1 none
	delta   int // what a file check adds to each member's weight
	percent int // agent percentage, -1 none
	changes []time.Time
	members map[ipvsmgr.ServerRef]*member
	// slowStart: some member ramps its weight up when it comes back (its
	// health changes with time, not only with results).
	slowStart bool
	// joined: a member was added since the last result (what it was told
	// may differ from what the others were).
	joined bool
	// connect is the tcp connect run between full checks (spec's
	// ConnectChecks, ldirectord's checktype = N), nil without;
	// connectsLeft is how many come before the next full check.
	connect      *ipvsmgr.CheckSpec
	connectsLeft int

	next time.Time
	// started is when the run under way began (zero: none runs);
	// lateTold: this round was counted late (watchdog.go).
	started  time.Time
	lateTold bool
	// removed: no longer checked; a removed probe still on the heap is
	// dropped when it comes to the top.
	removed bool
	cancel  context.CancelFunc // of the run under way
}

// member is one real server of one service checked by a probe.
type member struct {
	check    memberCheck
	probe    *probe
	up       bool      // in (up, or unknown and start_healthy)
	rampFrom time.Time // slow start began; zero when not ramping
	sent     ipvsmgr.ServerHealth
	sentFlt  string
}

// memberCheck is what a member keeps of its ServerCheck: which server of
// which service it is and what it does with its probe's results. Not the
// spec, which is the probe's: the 1,000 services of one probe would hold
// 1,000 copies of it (most of a member's size).
type memberCheck struct {
	Ref                     ipvsmgr.ServerRef
	ServiceName, ServerName string
	Weight                  uint32
	OnFailure               string
	SlowStart               time.Duration
	StartHealthy            bool
}

func memberCheckOf(c *ipvsmgr.ServerCheck) memberCheck {
	return memberCheck{Ref: c.Ref, ServiceName: c.ServiceName, ServerName: c.ServerName, Weight: c.Weight,
		OnFailure: c.OnFailure, SlowStart: c.SlowStart, StartHealthy: c.StartHealthy}
}

// NewRunner returns a runner with no checks; give it some with Update and
// start it with Run.
func NewRunner(cfg Config) *Runner {
	r := &Runner{cfg: cfg, check: cfg.Check, clock: cfg.Clock, wake: make(chan struct{}, 1),
		probes: map[string]*probe{}, members: map[ipvsmgr.ServerRef]*member{}}
	if r.check == nil {
		c := &Checker{}
		r.check = c.Run
	}
	if r.clock == nil {
		r.clock = realClock{}
	}
	_, r.realTime = r.clock.(realClock)
	r.epoch = r.clock.Now()
	if r.cfg.Workers <= 0 {
		r.cfg.Workers = 512
	}
	if r.cfg.FlapWindow <= 0 {
		r.cfg.FlapWindow = time.Minute
	}
	if r.cfg.FlapCount <= 0 {
		r.cfg.FlapCount = 4
	}
	if r.cfg.Log == nil {
		r.cfg.Log = slog.New(slog.DiscardHandler)
	}
	return r
}

// Update makes the runner check exactly checks (Desired.Checks of a newly
// compiled state). A server whose check did not change keeps its health and
// its schedule; the checks of servers no longer listed stop (a run under way
// is cancelled). New checks start at a random point of their warmup (the
// first interval unless the check says: keepalived's warmup), after the
// slack (see probe.slack), so that a thousand new servers are not all
// checked at once.
func (r *Runner) Update(checks []ipvsmgr.ServerCheck) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	probes := make(map[string]*probe, len(r.probes))
	members := make(map[ipvsmgr.ServerRef]*member, len(checks))
	for i := range checks {
		c := checks[i]
		if !c.Checked() {
			continue
		}
		key := c.Spec.Key()
		p := probes[key]
		if p == nil {
			if p = r.probes[key]; p == nil {
				p = &probe{key: key, spec: c.Spec, dynamic: -1, percent: -1, since: now}
				if c.Spec.ConnectChecks > 0 {
					cs := c.Spec
					cs.Type, cs.ConnectChecks = "tcp", 0
					p.connect = &cs
				}
				// Not within the slack of now: the first run is a batch's
				// like any other, not the one under way.
				slack, warmup := p.slack(), c.Spec.Interval
				if c.Spec.Warmup != nil {
					warmup = *c.Spec.Warmup
				}
				p.next = now.Add(slack + time.Duration(rand.Int64N(int64(max(warmup-slack, 1)))))
				r.enqueue(p)
			}
			p.members, p.slowStart = map[ipvsmgr.ServerRef]*member{}, false
			probes[key] = p
		}
		m := r.members[c.Ref]
		if m == nil || m.probe != p {
			p.joined = true
			m = r.join(p, c, m)
		} else {
			m.check = memberCheckOf(&c)
		}
		p.members[c.Ref] = m
		p.slowStart = p.slowStart || c.SlowStart > 0
		members[c.Ref] = m
	}
	for key, p := range r.probes {
		if probes[key] != nil {
			continue
		}
		p.removed = true
		if p.cancel != nil {
			p.cancel()
		}
	}
	r.probes, r.members = probes, members
	r.poke()
}

// join makes c a member of p; was is c's member of another probe (nil: c
// is new). What the member was told is what it is told again if it
// differs at p's next result: a new server that joins a check already up
// (a service added over real servers other services check) is told
// unknown->up as its own change, for its history and its notify_up; a
// server whose edited check is now another service's keeps what it was
// told, and hears only of a difference; one whose check starts over
// (p has no result yet) starts unknown.
func (r *Runner) join(p *probe, c ipvsmgr.ServerCheck, was *member) *member {
	m := &member{probe: p, check: memberCheckOf(&c)}
	m.up = m.in()
	if was != nil && p.state != ipvsmgr.HealthUnknown {
		m.sent, m.sentFlt = was.sent, was.sentFlt
	}
	return m
}

// Restore sets the state servers had before (kept in the store across a
// restart), for the checks that have no result yet, so that a restart
// neither takes every server out until its first pass nor puts a dead one in.
func (r *Runner) Restore(prev map[ipvsmgr.ServerRef]ipvsmgr.HealthState) {
	full := make(map[ipvsmgr.ServerRef]Restored, len(prev))
	for ref, st := range prev {
		full[ref] = Restored{State: st}
	}
	r.RestoreFrom(full)
}

// Restored is a server's health as the store kept it across a restart.
type Restored struct {
	State  ipvsmgr.HealthState
	Since  time.Time // zero: now
	Reason string    // of the transition to State
}

// RestoreFrom is Restore with since when and why each server has been in
// its state, so that a status after a restart still says so.
func (r *Runner) RestoreFrom(prev map[ipvsmgr.ServerRef]Restored) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	// Servers that share a check may have been kept in different states
	// (their checks were edited together while the daemon was down): the
	// check takes down, whatever order they come in, until it says.
	restored := map[*probe]bool{}
	for ref, rs := range prev {
		m := r.members[ref]
		if m == nil || rs.State == ipvsmgr.HealthUnknown {
			continue
		}
		if p := m.probe; p.state != ipvsmgr.HealthUnknown && !(restored[p] && p.state != rs.State && rs.State == ipvsmgr.HealthDown) {
			continue
		}
		restored[m.probe] = true
		m.probe.state = rs.State
		m.probe.reason = "restored"
		if rs.Reason != "" {
			m.probe.reason = rs.Reason + " (restored)"
		}
		if !rs.Since.IsZero() && rs.Since.Before(now) {
			m.probe.since = rs.Since
		}
	}
	for _, m := range r.members {
		m.up = m.in()
		m.sent = m.health(now)
	}
}

func (r *Runner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run schedules and runs the checks until ctx ends; it returns when every
// check it started has finished (each is cut at its timeout).
func (r *Runner) Run(ctx context.Context) error {
	b := &batch{sem: make(chan struct{}, r.cfg.Workers)}
	b.done = func() { <-b.sem; b.wg.Done() }
	defer b.wg.Wait()
	b.syn, b.tcp = r.tcpCheckers(ctx, &b.wg)
	for {
		r.mu.Lock()
		now := r.clock.Now()
		at := r.at(now)
		var due []*probe
		for len(r.queue) > 0 && r.queue[0].at <= at+int64(r.queue[0].p.slack()) {
			if p := r.queue.pop(); !p.removed {
				due = append(due, p)
			}
		}
		var next time.Time
		if len(r.queue) > 0 {
			next = r.queue[0].p.next
		}
		// Told under the same lock as next was read: a result that puts
		// its probe back before next wakes the loop, any other does not.
		r.asleep, r.wakeAt = len(due) == 0, next
		r.mu.Unlock()
		if len(due) > 0 {
			if err := r.startDue(ctx, b, due, now); err != nil {
				return err
			}
			continue
		}
		var timer <-chan time.Time
		stop := func() {}
		if !next.IsZero() {
			timer, stop = r.clock.Timer(next)
		}
		select {
		case <-ctx.Done():
			stop()
			return ctx.Err()
		case <-timer:
		case <-r.wake:
		}
		stop()
	}
}

// batch is what Run starts checks with: the bound on checks at once, the
// tcp checkers, the checks started.
type batch struct {
	sem  chan struct{}
	wg   sync.WaitGroup
	syn  *synProber
	tcp  *tcpConnector
	done func() // a tcp check's place is free
}

// synHeld bounds the tcp checks of a batch started at one reading of the
// clock, and the SYNs whose replies wait to be read together (in the raw
// socket's buffer).
const synHeld = 64

// synYield is how many SYNs startDue sends between yields.
const synYield = 16

// startDue starts the due checks (taken off the heap at now, the time the
// tcp checks start at: the clock is read again every synHeld of them);
// ctx's end puts back those not started.
func (r *Runner) startDue(ctx context.Context, b *batch, due []*probe, now time.Time) error {
	held, sent := false, 0
	release := func() {
		if held {
			b.syn.release()
			held = false
		}
	}
	defer release()
	for i, p := range due {
		if ctx.Err() != nil {
			r.requeue(due[i:])
			return ctx.Err()
		}
		if len(b.sem) == cap(b.sem) || sent == synHeld {
			release() // the held replies free their places
			sent = 0
			now = r.clock.Now()
		}
		select {
		case b.sem <- struct{}{}:
		case <-ctx.Done():
			r.requeue(due[i:])
			return ctx.Err()
		}
		b.wg.Add(1)
		if spec := p.round(); spec.Type == "tcp" {
			if b.syn != nil && !held {
				b.syn.hold()
				held = true
			}
			if r.startTCP(ctx, b.syn, b.tcp, p, spec, now, b.done) {
				if sent++; sent%synYield == 0 {
					// A batch's SYNs are raw system calls, which the
					// runtime counts as running: a yield now and then is
					// cheaper than the preemption signal its monitor
					// sends a goroutine running for 10 ms.
					runtime.Gosched()
				}
				continue
			}
		}
		go func() {
			defer b.wg.Done()
			defer func() { <-b.sem }()
			r.runProbe(ctx, p)
		}()
	}
	return nil
}

// requeue puts back probes taken off the heap but not started.
func (r *Runner) requeue(ps []*probe) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range ps {
		if !p.removed {
			r.enqueue(p)
		}
	}
}

func (r *Runner) runProbe(ctx context.Context, p *probe) {
	r.mu.Lock()
	if p.removed {
		r.mu.Unlock()
		return
	}
	runCtx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	spec := *p.round()
	start := r.clock.Now()
	r.begin(p, start)
	r.mu.Unlock()

	res := r.check(runCtx, &spec)
	cancel()
	r.finish(ctx, p, &spec, start, res)
}

// SetCheck replaces the real checks (tcp on the prober and the connector
// included) with check, as Config.Check does; call it before Run.
func (r *Runner) SetCheck(check func(ctx context.Context, spec *ipvsmgr.CheckSpec) Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cfg.Check, r.check = check, check
}

// tcpCheckers starts what runs tcp checks when the runner runs the real
// checks: the half-open prober where a raw socket can be opened, and the
// connector, for the checks the prober cannot make and where there is no
// prober; nil for those that cannot be made, both nil (every check dials)
// when a test's Check replaces them.
func (r *Runner) tcpCheckers(ctx context.Context, wg *sync.WaitGroup) (*synProber, *tcpConnector) {
	r.mu.Lock()
	replaced := r.cfg.Check != nil || r.noConnector
	noSyn := r.noSynProbe
	r.mu.Unlock()
	if replaced {
		return nil, nil
	}
	var syn *synProber
	if !noSyn {
		var err error
		if syn, err = newSynProber(); err != nil {
			r.cfg.Log.Info("tcp checks connect: no raw socket for a half-open check", "err", err)
		} else {
			wg.Add(1)
			go func() {
				defer wg.Done()
				syn.run(ctx)
			}()
		}
	}
	tcp, err := newTCPConnector()
	if err != nil {
		r.cfg.Log.Warn("tcp checks dial, one goroutine each", "err", err)
		return syn, nil
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tcp.run(ctx)
	}()
	return syn, tcp
}

// startTCP begins p's tcp check on the prober, else the connector, with no
// goroutine of its own; start is when its batch began (the next check is
// an interval after it), and release is called once the result is recorded.
// false: neither can make this check, and the caller runs it as any other.
func (r *Runner) startTCP(ctx context.Context, syn *synProber, tcp *tcpConnector, p *probe, spec *ipvsmgr.CheckSpec, start time.Time, release func()) bool {
	if syn == nil && tcp == nil {
		return false
	}
	r.mu.Lock()
	if p.removed {
		r.mu.Unlock()
		release()
		return true
	}
	r.begin(p, start)
	r.mu.Unlock()
	begin := start
	if !r.realTime {
		begin = time.Now()
	}
	finish := func(res Result) {
		defer release()
		now := begin.Add(res.Duration)
		if !r.realTime {
			now = r.clock.Now()
		}
		r.finishAt(ctx, p, spec, start, res, now)
	}
	return syn != nil && syn.start(spec, begin, finish) || tcp != nil && tcp.start(spec, begin, finish)
}

// finish records a check's result, tells the changes, and puts the probe
// back on the heap.
func (r *Runner) finish(ctx context.Context, p *probe, spec *ipvsmgr.CheckSpec, start time.Time, res Result) {
	r.finishAt(ctx, p, spec, start, res, r.clock.Now())
}

// finishAt is finish with the time the result came.
func (r *Runner) finishAt(ctx context.Context, p *probe, spec *ipvsmgr.CheckSpec, start time.Time, res Result, now time.Time) {
	if r.cfg.OnCheck != nil {
		r.cfg.OnCheck(spec, res)
	}
	r.mu.Lock()
	p.cancel, p.started = nil, time.Time{}
	if p.removed || ctx.Err() != nil {
		r.mu.Unlock()
		return
	}
	p.scheduleConnects(spec, res.Outcome)
	events := r.record(p, res, now)
	r.mu.Unlock()
	for _, e := range events {
		if r.cfg.Notify != nil {
			r.cfg.Notify(e)
		}
	}
	// Back on the heap only after its events are out, so that the events
	// of one server are told in order.
	r.mu.Lock()
	wake := false
	if !p.removed {
		p.next = start.Add(p.interval())
		if p.next.Before(now) {
			p.next = now
		}
		r.enqueue(p)
		// A thousand results a second would wake the loop as often, to
		// find nothing due: only one due before its timer does.
		wake = r.asleep && (r.wakeAt.IsZero() || p.next.Before(r.wakeAt))
	}
	hook := r.afterResult
	r.mu.Unlock()
	if wake {
		r.poke()
	}
	if hook != nil {
		hook()
	}
}

// record runs the state machine on one result and returns the changes it
// makes to the probe's members.
func (r *Runner) record(p *probe, res Result, now time.Time) []Event {
	from, fault, dynamic, percent, delta := p.state, p.fault, p.dynamic, p.percent, p.delta
	p.last, p.lastAt = res, now
	switch res.Outcome {
	case Fault:
		p.fault = res.Reason
		r.cfg.Log.Warn("health check cannot run", "target", p.spec.Target.String(), "type", p.spec.Type, "fault", res.Reason)
	case Pass:
		p.fault = ""
		p.fails, p.passes = 0, p.passes+1
		if res.Weight >= 0 {
			p.dynamic = res.Weight
		}
		if res.Percent >= 0 {
			p.percent = res.Percent
		}
		p.delta = res.Delta
		if p.state == ipvsmgr.HealthUnknown || p.state == ipvsmgr.HealthDown && p.passes >= p.spec.Rise {
			p.transition(ipvsmgr.HealthUp, res.Reason, now, r.flapWindow(p))
		}
	case Fail:
		p.fault = ""
		p.passes, p.fails = 0, p.fails+1
		if p.state == ipvsmgr.HealthUnknown || p.state == ipvsmgr.HealthUp && p.fails >= p.spec.Fall {
			p.transition(ipvsmgr.HealthDown, res.Reason, now, r.flapWindow(p))
		}
	}
	if from != p.state {
		r.cfg.Log.Info("real server health changed", "target", p.spec.Target.String(), "from", from.String(), "to", p.state.String(), "reason", res.Reason)
	}
	if from == p.state && fault == p.fault && dynamic == p.dynamic && percent == p.percent && delta == p.delta && !p.slowStart && !p.joined {
		return nil // as most results: no member's health can have changed
	}
	p.joined = false
	flapping := len(p.changes) >= r.cfg.FlapCount
	var events []Event
	for _, m := range p.members {
		in := m.in()
		switch {
		case in && !m.up && m.check.SlowStart > 0:
			m.rampFrom = now
		case !in, !m.rampFrom.IsZero() && now.Sub(m.rampFrom) >= m.check.SlowStart:
			m.rampFrom = time.Time{}
		}
		m.up = in
		h := m.health(now)
		if h == m.sent && p.fault == m.sentFlt && from == p.state {
			continue
		}
		// From is what this member was told: the probe's state before,
		// unless the member joined it since.
		told := m.sent.State
		m.sent, m.sentFlt = h, p.fault
		events = append(events, Event{Ref: m.check.Ref, ServiceName: m.check.ServiceName, ServerName: m.check.ServerName,
			At: now, From: told, To: p.state, Health: h, Reason: res.Reason, Fault: p.fault, Flapping: flapping,
			Ramp: !m.rampFrom.IsZero() && from == p.state, Quiesce: m.check.OnFailure == "quiesce"})
	}
	return events
}

func (r *Runner) flapWindow(p *probe) time.Duration {
	return max(r.cfg.FlapWindow, 10*p.spec.Interval)
}

func (p *probe) transition(to ipvsmgr.HealthState, reason string, now time.Time, window time.Duration) {
	p.state, p.since, p.reason = to, now, reason
	kept := p.changes[:0]
	for _, t := range p.changes {
		if now.Sub(t) < window {
			kept = append(kept, t)
		}
	}
	p.changes = append(kept, now)
}

// in says whether the server gets traffic by its checks: up, or not checked
// yet and starting healthy.
func (m *member) in() bool {
	return m.probe.state == ipvsmgr.HealthUp || m.probe.state == ipvsmgr.HealthUnknown && m.check.StartHealthy
}

// health is the server's state and weight at now: the configured weight,
// replaced by an exec check's dynamic weight, moved by a file check's
// number (never below 0), scaled by an agent's
// percentage, ramped during slow start.
func (m *member) health(now time.Time) ipvsmgr.ServerHealth {
	p := m.probe
	h := ipvsmgr.ServerHealth{State: p.state}
	w := int64(m.check.Weight)
	if p.dynamic >= 0 {
		w = int64(p.dynamic)
	}
	w = max(w+int64(p.delta), 0)
	if p.percent >= 0 {
		w = (w*int64(p.percent) + 50) / 100
	}
	if ss := m.check.SlowStart; !m.rampFrom.IsZero() && ss > 0 && w > 0 {
		if el := now.Sub(m.rampFrom); el < ss {
			w = max(1, (w*int64(el)+int64(ss)-1)/int64(ss))
		}
	}
	w = min(w, 65535)
	if uint32(w) != m.check.Weight {
		h.Weight, h.WeightSet = uint32(w), true
	}
	return h
}

// View is the health of every checked server now, for the plan
// (Desired.Health).
func (r *Runner) View() *ipvsmgr.HealthView {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	v := &ipvsmgr.HealthView{Servers: make(map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth, len(r.members))}
	for ref, m := range r.members {
		v.Servers[ref] = m.health(now)
	}
	return v
}

// probeHeap is the probes waiting for their next run, soonest first.
// Each entry holds its time, so that ordering 10,000 probes reads no probe:
// container/heap over the probes' own times took some 8% of the daemon's
// CPU samples at 10,000 targets in the VM (perf), most of it in Less.
type probeHeap []queued

// queued is a probe on the heap and its next run time (Runner.at).
type queued struct {
	at int64
	p  *probe
}

// at is t as the heap orders it: nanoseconds since the runner's epoch, on
// the monotonic clock when t has its reading.
func (r *Runner) at(t time.Time) int64 { return int64(t.Sub(r.epoch)) }

// enqueue puts p on the heap at p.next; r.mu is held.
func (r *Runner) enqueue(p *probe) { r.queue.push(queued{r.at(p.next), p}) }

func (h *probeHeap) push(q queued) {
	*h = append(*h, q)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if s[parent].at <= s[i].at {
			break
		}
		s[parent], s[i] = s[i], s[parent]
		i = parent
	}
}

// pop takes the soonest probe off the heap (which is not empty).
func (h *probeHeap) pop() *probe {
	s := *h
	p := s[0].p
	n := len(s) - 1
	s[0], s[n] = s[n], queued{}
	s = s[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && s[c+1].at < s[c].at {
			c++
		}
		if s[i].at <= s[c].at {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	*h = s
	return p
}

// round is the check p's next run makes: the full check, or a tcp connect
// while connects are left (what startDue and runProbe run).
func (p *probe) round() *ipvsmgr.CheckSpec {
	if p.connectsLeft > 0 {
		return p.connect
	}
	return &p.spec
}

// scheduleConnects counts the connects left after a run of spec, as
// ldirectord's _check_real counts num_connects: a full check that passes
// is followed by ConnectChecks connects, a connect that fails by a full
// check at once; a fault (the check could not run) changes nothing.
func (p *probe) scheduleConnects(spec *ipvsmgr.CheckSpec, o Outcome) {
	if p.connect == nil || o == Fault {
		return
	}
	switch {
	case o == Fail:
		p.connectsLeft = 0
	case spec.Type == p.spec.Type:
		p.connectsLeft = p.spec.ConnectChecks
	default:
		p.connectsLeft--
	}
}

// interval is how long after this run the next one starts: the fast
// interval while the server is changing state (a failure while it is in, a
// pass while it is out), the down interval while it is out, else the
// interval.
func (p *probe) interval() time.Duration {
	s := &p.spec
	switch {
	case s.FastInterval > 0 && (p.state == ipvsmgr.HealthUp && p.fails > 0 || p.state == ipvsmgr.HealthDown && p.passes > 0):
		return s.FastInterval
	case s.DownInterval > 0 && p.state == ipvsmgr.HealthDown:
		return s.DownInterval
	}
	return s.Interval
}
