package daemon

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/health"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/events"
)

// The watchdog reads the checks' progress every watchEvery (every
// watchStarting until the director is ready, so that readiness is told
// soon after it is reached), on the runner's clock.
const (
	watchEvery    = time.Second
	watchStarting = 100 * time.Millisecond
)

// startedBound is how long systemd waits at most for READY=1: a director
// not ready by then (no IPVS in the kernel, a check that has not run yet)
// tells systemd it has started all the same, saying what it waits for,
// rather than be killed at the unit's start timeout (5 min) and restarted,
// which would make a VRRP master resign each time. GET /readyz goes on
// saying 503 until it is ready.
const startedBound = 2 * time.Minute

// checkerWatch is the watchdog's state: whether a round is late, and
// when the director became ready.
type checkerWatch struct {
	mu      sync.Mutex
	late    bool
	readyAt time.Time // zero: not yet
	waiting string    // what readiness waits for
	told    string    // the last STATUS= sent to systemd
	started bool      // READY=1 was sent before the director was ready (startedBound)
}

// watchChecks runs the watchdog until ctx ends.
func (d *Daemon) watchChecks(ctx context.Context) {
	clk := d.sk.health.Clock()
	since := clk.Now()
	for {
		every := watchEvery
		if !d.watchOnce(ctx, clk.Now().Sub(since)) {
			every = watchStarting
		}
		c, stop := clk.Timer(clk.Now().Add(every))
		select {
		case <-ctx.Done():
			stop()
			d.sdNotify("STOPPING=1")
			return
		case <-c:
		}
	}
}

// watchOnce reads the progress once, up for the time given: tells of a
// round falling late or catching up, and of readiness; it returns whether
// the director is ready.
func (d *Daemon) watchOnce(ctx context.Context, up time.Duration) bool {
	p := d.sk.health.Progress()
	w := &d.watch
	w.mu.Lock()
	wasLate, ready := w.late, !w.readyAt.IsZero()
	w.late = p.Late > 0
	w.mu.Unlock()
	switch {
	case p.Late > 0 && !wasLate:
		d.Log.Warn("health checks are late", "late", p.Late, "worst", p.Worst, "target", p.WorstTarget, "type", p.WorstType)
		d.Core.Events().Publish(events.Event{Time: time.Now(), Type: events.CheckerLate, Subject: "checker",
			Message: fmt.Sprintf("%d of %d checks are late by more than their interval; the worst, %s %s, by %s",
				p.Late, p.Probes, p.WorstType, p.WorstTarget, p.Worst.Round(time.Millisecond)),
			Fields: map[string]string{"late": strconv.Itoa(p.Late), "checks": strconv.Itoa(p.Probes),
				"worst_seconds": strconv.FormatFloat(p.Worst.Seconds(), 'f', 3, 64), "target": p.WorstTarget, "type": p.WorstType}})
	case p.Late == 0 && wasLate:
		d.Log.Info("health checks caught up", "late rounds", p.LateRounds)
		d.Core.Events().Publish(events.Event{Time: time.Now(), Type: events.CheckerCaughtUp, Subject: "checker",
			Message: fmt.Sprintf("every check is on time again (%d rounds late since the start)", p.LateRounds),
			Fields:  map[string]string{"late_rounds": strconv.FormatUint(p.LateRounds, 10)}})
	}
	if ready {
		return true
	}
	waiting := d.readiness(ctx, p)
	w.mu.Lock()
	w.waiting = waiting
	if waiting == "" {
		w.readyAt = time.Now()
	}
	status := "STATUS=waiting for " + waiting
	tell := waiting != "" && status != w.told
	w.told = status
	started := waiting != "" && up >= startedBound && !w.started
	if started {
		w.started = true
	}
	w.mu.Unlock()
	if started {
		d.Log.Warn("not ready after "+startedBound.String()+": systemd is told the daemon started", "waiting for", waiting)
		d.sdNotify("READY=1\n" + status)
	} else if tell {
		d.sdNotify(status)
	}
	if waiting != "" {
		return false
	}
	msg := fmt.Sprintf("ready: every check has run once (%d checks)", p.Checks)
	if p.Checks == 0 {
		msg = "ready: the first reconcile is done (no checks)"
	}
	d.Log.Info(msg)
	d.Core.Events().Publish(events.Event{Time: time.Now(), Type: events.CheckerReady, Subject: "checker", Message: msg,
		Fields: map[string]string{"checks": strconv.Itoa(p.Checks)}})
	d.sdNotify("READY=1\nSTATUS=" + msg)
	return true
}

// readiness is what the director's readiness waits for; "" once it is
// ready: every check has run once and a reconcile since has laid their
// results on the kernel (with no checks: the first reconcile).
func (d *Daemon) readiness(ctx context.Context, p health.Progress) string {
	if p.NotRun > 0 {
		return fmt.Sprintf("%d of %d checks to run once", p.NotRun, p.Checks)
	}
	if p.Checks == 0 {
		if _, ok := d.sk.LastReconcile(); ok {
			return ""
		}
		return "the first reconcile"
	}
	if _, err := d.sk.reconcile(ctx, true, nil); err != nil {
		return "a reconcile with every check's result (" + err.Error() + ")"
	}
	return ""
}

// startDelay is the status's form of the runner's start delays.
func startDelay(d *health.Delays) server.StartDelay {
	sd := server.StartDelay{Count: d.Count, SumSeconds: d.Sum.Seconds(), P50: d.Quantile(0.5).Seconds(), P99: d.Quantile(0.99).Seconds(),
		Buckets: make([]server.DelayBucket, len(health.DelayBounds))}
	var n uint64
	for i, le := range health.DelayBounds {
		n += d.Counts[i]
		sd.Buckets[i] = server.DelayBucket{LE: le, Count: n}
	}
	return sd
}

// checkerStatus is the core's CheckerStatus.
func (d *Daemon) checkerStatus() *server.CheckerStatus {
	p := d.sk.health.Progress()
	w := &d.watch
	w.mu.Lock()
	readyAt, waiting := w.readyAt, w.waiting
	w.mu.Unlock()
	st := &server.CheckerStatus{Ready: !readyAt.IsZero(), Waiting: waiting, Checks: p.Checks, Distinct: p.Probes,
		NotRun: p.NotRun, Late: p.Late, WorstLate: p.Worst.Seconds(), WorstTarget: p.WorstTarget,
		LateRounds: p.LateRounds, OldestRunAge: p.OldestRun.Seconds(), StartDelay: startDelay(&p.StartDelay)}
	if st.Ready {
		st.ReadyAt = &readyAt
	} else if st.Waiting == "" {
		st.Waiting = "the watchdog's first look"
	}
	return st
}
