package daemon

import (
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
	"github.com/ipvsctl/ipvsctl/server"
)

// bgpDrain is the BGP runner's view of node drain: the watch of a drain in
// progress, and the phase last logged.
type bgpDrain struct {
	watch  *bgp.DrainWatch
	policy ipvsmgr.BGPDrain
	phase  string
	// before is the last reading of the VIPs' counters while not drained.
	before *connReading
}

type connReading struct {
	at    time.Time
	conns uint64
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// drain follows node drain in the status and says how many times the AS is
// to be prepended to every route: in prepend mode the routes stay announced
// but de-preferred (the routers send new flows to the other directors and
// keep this one as a fallback); in withdraw mode Decide has withdrawn them.
// Either way the director is drained once no new connection has reached
// its VIPs for the quiet window.
func (r *bgpRunner) drain(drained bool, pol ipvsmgr.BGPDrain, desired *ipvsmgr.Desired, snap *server.Snapshot, st *server.BGPStatus) int {
	var reading *connReading
	if snap != nil && snap.Err == nil && snap.Table != nil {
		reading = &connReading{at: snap.At, conns: bgp.VIPConns(desired, snap.Table)}
	}
	if !drained {
		if r.drainSt.watch != nil {
			r.d.Log.Info("BGP: node undrain, routes announced with the plain path again")
		}
		r.drainSt = bgpDrain{before: reading}
		return 0
	}
	now := time.Now()
	if r.drainSt.watch == nil || r.drainSt.policy != pol {
		w := bgp.NewDrainWatch(now, pol.Mode, pol.Prepend, seconds(pol.Quiet), seconds(pol.Timeout))
		// The last reading before the drain is where its count starts: a
		// connection between it and the first reading after is new.
		if b := r.drainSt.before; b != nil {
			w.Observe(b.at, b.conns)
		}
		r.drainSt = bgpDrain{watch: w, policy: pol}
		r.d.Log.Info("BGP: node drain", "mode", pol.Mode, "prepend", pol.Prepend, "quiet_s", pol.Quiet, "timeout_s", pol.Timeout)
	}
	if reading != nil {
		r.drainSt.watch.Observe(reading.at, reading.conns)
	}
	ds := r.drainSt.watch.Status(now)
	st.Drain = &ds
	if ds.Phase != r.drainSt.phase {
		r.drainSt.phase = ds.Phase
		switch ds.Phase {
		case bgp.DrainDrained:
			r.d.Log.Info("BGP: node drained", "why", ds.Why, "new_conns", ds.NewConns, "after_s", ds.DrainedAt.Sub(ds.Started).Seconds())
		case bgp.DrainTimedOut:
			r.d.Log.Warn("BGP: node drain timed out", "why", ds.Why)
		}
	}
	if pol.Mode != ipvsmgr.DrainPrepend {
		return 0
	}
	for i := range st.VIPs {
		if v := &st.VIPs[i]; v.Announce {
			v.Prepend, v.Reason = pol.Prepend, "de-preferred by node drain (the AS path is longer)"
		}
	}
	return pol.Prepend
}
