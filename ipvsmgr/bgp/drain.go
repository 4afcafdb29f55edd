package bgp

import (
	"fmt"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Drain phases.
const (
	DrainDraining = "draining"
	DrainDrained  = "drained"
	DrainTimedOut = "timed_out"
)

// DrainStatus is how far a node drain has come.
type DrainStatus struct {
	Mode    string    `json:"mode"`              // prepend or withdraw
	Prepend int       `json:"prepend,omitempty"` // times, in prepend mode
	Phase   string    `json:"phase"`             // draining, drained, timed_out
	Started time.Time `json:"started"`
	// DrainedAt is when the quiet window was first full.
	DrainedAt time.Time `json:"drained_at,omitzero"`
	// NewConns counts the connections the director's VIP services took
	// since the drain began; Rate is their rate over the last reading, per second.
	NewConns uint64  `json:"new_conns"`
	Rate     float64 `json:"rate"`
	// Quiet is the seconds since the last new connection was seen, out of
	// QuietWindow; Elapsed the seconds since the drain began, out of Timeout.
	Quiet       float64 `json:"quiet"`
	QuietWindow float64 `json:"quiet_window"`
	Elapsed     float64 `json:"elapsed"`
	Timeout     float64 `json:"timeout"`
	// Why says in words where the drain is.
	Why string `json:"why"`
}

// DrainWatch tells when the routers have stopped sending a drained director
// new flows: it reads the sum of the connection counters of the director's
// VIP services (IPVS counts each connection it schedules) and calls the
// director drained once that sum has not grown for the quiet window.
// The kernel sums its per-CPU counters every 2 s and the daemon reads them
// every 2 s, so the window must be longer than about 4 s to mean anything.
type DrainWatch struct {
	st      DrainStatus
	quiet   time.Duration
	timeout time.Duration
	last    uint64    // the counter at the last reading
	lastAt  time.Time // when it was read
	lastNew time.Time // the reading at which it last grew (or the start, or a first reading after it)
	read    bool
}

// NewDrainWatch starts watching a drain that began at start.
func NewDrainWatch(start time.Time, mode string, prepend int, quiet, timeout time.Duration) *DrainWatch {
	w := &DrainWatch{quiet: quiet, timeout: timeout, lastNew: start}
	w.st = DrainStatus{Mode: mode, Phase: DrainDraining, Started: start, QuietWindow: quiet.Seconds(), Timeout: timeout.Seconds()}
	if mode == "prepend" {
		w.st.Prepend = prepend
	}
	return w
}

// Observe takes a reading of the counter sum made at at; a reading no newer
// than the last is ignored. A sum below the last (a service re-created, its
// counter from 0) counts all of it as new.
func (w *DrainWatch) Observe(at time.Time, conns uint64) {
	if w.read && !at.After(w.lastAt) {
		return
	}
	if !w.read && at.After(w.lastNew) {
		// The first reading after the drain began says nothing of the time
		// before it: the quiet window counts from it, never from the start.
		w.lastNew = at
	}
	if w.read {
		grew := conns - w.last
		if conns < w.last {
			grew = conns
		}
		w.st.Rate = float64(grew) / at.Sub(w.lastAt).Seconds()
		if grew > 0 {
			w.st.NewConns += grew
			w.lastNew = at
		}
	}
	w.last, w.lastAt, w.read = conns, at, true
	if w.st.DrainedAt.IsZero() && at.Sub(w.lastNew) >= w.quiet {
		w.st.DrainedAt = at
	}
}

// Status is the drain's status at now. Drained stays drained: a connection
// after it (a client the routers still hash here, a probe) is counted but
// does not undo it.
func (w *DrainWatch) Status(now time.Time) DrainStatus {
	st := w.st
	st.Elapsed = now.Sub(st.Started).Seconds()
	if w.read { // a first reading made before the drain began counts from its start
		st.Quiet = max(w.lastAt.Sub(w.lastNew), 0).Seconds()
	}
	switch {
	case !st.DrainedAt.IsZero():
		st.Phase = DrainDrained
		st.Why = fmt.Sprintf("no new connection for %.1f s: the routers send this director no new flows", st.QuietWindow)
	case now.Sub(st.Started) >= w.timeout:
		st.Phase = DrainTimedOut
		st.Why = fmt.Sprintf("after %.0f s new connections still arrive (%.1f/s, %d since the drain began)", st.Timeout, st.Rate, st.NewConns)
		if st.Mode == "prepend" {
			st.Why += ": the routers have no other path to prefer (is another director announcing?) or ignore the AS path length; settings.bgp.drain.mode withdraw takes the routes away"
		}
	case !w.read:
		st.Phase, st.Why = DrainDraining, "waiting for the first reading of the kernel's counters"
	default:
		st.Phase = DrainDraining
		st.Why = fmt.Sprintf("%d new connections since the drain began, %.1f/s; quiet for %.1f of %.1f s", st.NewConns, st.Rate, st.Quiet, st.QuietWindow)
	}
	return st
}

// VIPConns is the sum of the connection counters of a kernel table's
// services that are on the director's VIPs: what a drain watches grow.
func VIPConns(d *ipvsmgr.Desired, kernel *ipvsmgr.Table) uint64 {
	if d == nil || kernel == nil {
		return 0
	}
	vips := vipsOf(d)
	var n uint64
	for _, vs := range kernel.Services {
		if _, ok := vipOf(d, vs.Key, vips); ok {
			n += vs.Stats.Conns
		}
	}
	return n
}
