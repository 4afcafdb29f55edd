package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/health"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// daemonHealth is the daemon's side of the health checks: the events the
// runner tells of, queued twice — once to wake a reconcile (bursts coalesce
// into one), once to be kept in the store by a writer of its own, so that a
// slow disk never delays taking a dead server out.
type daemonHealth struct {
	checker health.Checker
	wake    chan struct{} // a reconcile is due
	saveNow chan struct{} // transitions wait to be stored

	mu      sync.Mutex
	pending []health.Event // not yet reconciled
	unsaved []health.Event // not yet stored

	// hooks, set before Run (metrics).
	onEvent func(health.Event)
	onCheck func(spec *ipvsmgr.CheckSpec, r health.Result)
}

func newDaemonHealth() *daemonHealth {
	return &daemonHealth{wake: make(chan struct{}, 1), saveNow: make(chan struct{}, 1)}
}

// OnHealthEvent calls f with every change the checks make (metrics). Set it before Run.
func (d *Daemon) OnHealthEvent(f func(health.Event)) { d.health.onEvent = f }

// OnCheck calls f after every check run (metrics). Set it before Run.
func (d *Daemon) OnCheck(f func(spec *ipvsmgr.CheckSpec, r health.Result)) { d.health.onCheck = f }

// runCheck runs one check now (the health verb's --check): the daemon's
// Check (tests), else the real one.
func (d *Daemon) runCheck(ctx context.Context, spec *ipvsmgr.CheckSpec) health.Result {
	var r health.Result
	if d.Check != nil {
		r = d.Check(ctx, spec)
	} else {
		r = d.health.checker.Run(ctx, spec)
	}
	d.checked(spec, r)
	return r
}

// checked is told of every check run (the runner's and runCheck's).
func (d *Daemon) checked(spec *ipvsmgr.CheckSpec, r health.Result) {
	if f := d.health.onCheck; f != nil {
		f(spec, r)
	}
}

// notify is the runner's Notify: it must return at once.
func (d *Daemon) notify(e health.Event) {
	h := d.health
	h.mu.Lock()
	h.pending = append(h.pending, e)
	h.unsaved = append(h.unsaved, e)
	h.mu.Unlock()
	d.sk.healthGen.Add(1) // after the runner's status has it: a view keyed on it shows it
	poke(h.wake)
	poke(h.saveNow)
	if f := h.onEvent; f != nil {
		f(e)
	}
	if ev, ok := healthEvent(e); ok {
		d.Core.Events().Publish(ev)
	}
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// startHealth gives the runner the stored state's checks and the health the
// store kept from the last run (so that a restart does not take every
// checked server out until its first pass, nor put a dead one back), then
// starts the checks and the writer of their transitions. done is closed
// once both have stopped, after ctx ends.
func (d *Daemon) startHealth(ctx context.Context) (done <-chan struct{}) {
	sk := d.sk
	if d.HealthClock != nil {
		sk.health.SetClock(d.HealthClock)
	}
	if st, rev, err := d.store.Current(ctx); err != nil {
		d.Log.Error("read desired state", "err", err)
	} else if desired, err := ipvsmgr.Compile(st); err != nil {
		d.Log.Error("stored desired state is invalid", "revision", rev, "err", err)
	} else {
		sk.offer(rev, desired, false)
	}
	saved := map[ipvsmgr.ServerRef]store.HealthTransition{}
	if cur, err := d.store.CurrentHealth(ctx); err != nil {
		d.Log.Error("read the health kept from the last run; checked servers start unknown", "err", err)
	} else {
		prev := make(map[ipvsmgr.ServerRef]health.Restored, len(cur))
		for ref, tr := range cur {
			prev[ref] = health.Restored{State: tr.To, Since: tr.At, Reason: tr.Reason}
			saved[ref] = tr
		}
		sk.health.RestoreFrom(prev)
	}
	if d.Check != nil {
		sk.health.SetCheck(d.Check)
	}
	ch := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		sk.health.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		d.watchChecks(ctx)
	}()
	go func() {
		defer wg.Done()
		d.saveTransitions(ctx, saved)
	}()
	go func() {
		wg.Wait()
		close(ch)
	}()
	return ch
}

// healthGather is how long a reconcile after a health change waits for
// the rest of a burst (a thousand new servers passing their first check
// within one interval): one reconcile for them, not one each.
const healthGather = 50 * time.Millisecond

// healthChanged reconciles at once after the checks changed something.
func (d *Daemon) healthChanged(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(healthGather):
	}
	h := d.health
	h.mu.Lock()
	n := len(h.pending)
	h.pending = nil
	h.mu.Unlock()
	if n == 0 {
		return
	}
	sk := d.sk
	res, err := sk.reconcile(ctx, true, nil)
	if err != nil {
		if sk.isOpen() && ctx.Err() == nil {
			d.Log.Error("reconcile after a health change", "err", err)
			d.reconcileFailed(0, err)
		}
		return
	}
	d.Log.Debug("health change applied", "events", n, "kernel changes", len(res.Changes))
}

// saveTransitions keeps the transitions in the store until ctx ends (then
// what is queued, with a short grace). A slow-start step is applied but not
// kept: the history shows the server coming up, and its full weight.
func (d *Daemon) saveTransitions(ctx context.Context, last map[ipvsmgr.ServerRef]store.HealthTransition) {
	h := d.health
	flush := func(ctx context.Context) {
		h.mu.Lock()
		evs := h.unsaved
		h.unsaved = nil
		h.mu.Unlock()
		var trs []store.HealthTransition
		for _, e := range evs {
			tr := store.HealthTransition{Ref: e.Ref, At: e.At, From: e.From, To: e.To, Reason: e.Reason,
				Weight: e.Health.Weight, WeightSet: e.Health.WeightSet, Fault: e.Fault}
			prev, seen := last[e.Ref]
			changed := !seen || prev.To != tr.To || prev.Fault != tr.Fault ||
				!e.Ramp && (prev.WeightSet != tr.WeightSet || prev.Weight != tr.Weight)
			if !changed {
				continue
			}
			last[e.Ref] = tr
			trs = append(trs, tr)
		}
		if err := d.store.SaveHealthTransitions(ctx, trs); err != nil {
			d.Log.Error("keep health transitions", "count", len(trs), "err", err)
		}
	}
	// A batch taken is written whatever ctx does meanwhile: an end that
	// comes as it is written must not lose it.
	write := func() {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		flush(wctx)
	}
	for {
		select {
		case <-ctx.Done():
			write()
			return
		case <-h.saveNow:
			write()
		}
	}
}
