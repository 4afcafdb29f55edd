package daemon

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
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

// fingerprints puts this director's Maglev-input fingerprints in the
// status (from the kernel's table as the poller read it: the order mh
// walks) and compares them with what the other directors said last.
func (r *bgpRunner) fingerprints(desired *ipvsmgr.Desired, snap *server.Snapshot, st *server.BGPStatus) {
	if snap != nil && snap.Table != nil {
		st.Fingerprints = bgp.Fingerprints(desired, snap.Table)
	}
	r.peersMu.Lock()
	st.Directors = r.others
	r.peersMu.Unlock()
	st.Mismatches = bgp.Compare(st.Fingerprints, st.Directors)
	st.Mismatch = len(st.Mismatches) > 0
}

// BGPPeerPoll is how often a director asks the others for their fingerprints.
const BGPPeerPoll = 5 * time.Second

// NodeReader is another director that answers its node settings (package
// client's peer Client does, over the pinned TLS of the node settings).
type NodeReader interface {
	NodeSettings(ctx context.Context) (*server.NodeView, error)
}

// directorRef is another director of the BGP group, as this one knows it.
type directorRef struct{ url, token, fingerprint string }

// otherDirectors are the directors this one knows: today the peer it
// replicates from (node set --peer-url), with its token and pinned
// fingerprint.
func otherDirectors(n store.Node) []directorRef {
	if n.PeerURL == "" {
		return nil
	}
	return []directorRef{{url: n.PeerURL, token: n.PeerToken, fingerprint: n.PeerFingerprint}}
}

// askDirectors asks the other directors for their fingerprints every
// BGPPeerPoll until ctx ends.
func (r *bgpRunner) askDirectors(ctx context.Context) {
	clients := map[directorRef]NodeReader{}
	tick := time.NewTicker(BGPPeerPoll)
	defer tick.Stop()
	for {
		if _, desired := r.d.sk.current(); desired != nil && desired.Settings.BGP != nil {
			r.askOnce(ctx, clients)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (r *bgpRunner) askOnce(ctx context.Context, clients map[directorRef]NodeReader) {
	node, err := r.d.store.Node(ctx)
	if err != nil {
		return
	}
	refs := otherDirectors(node)
	out := make([]bgp.DirectorFingerprints, len(refs))
	var wg sync.WaitGroup
	for i, ref := range refs {
		out[i].Director = ref.url
		cl, ok := clients[ref]
		if !ok {
			if r.d.Directors == nil {
				out[i].Error = "this daemon cannot reach other directors"
				continue
			}
			c, err := r.d.Directors(ref.url, ref.token, ref.fingerprint)
			if err != nil {
				out[i].Error = err.Error()
				continue
			}
			cl = c
			clients[ref] = cl
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, BGPPeerPoll)
			defer cancel()
			v, err := cl.NodeSettings(actx)
			switch {
			case err != nil:
				out[i].Error = "ask for its fingerprints: " + err.Error()
			case v.BGP == nil:
				out[i].Error = "it runs no BGP speaker (no daemon there, or no settings.bgp)"
			default:
				out[i].Services, out[i].Name = v.BGP.Fingerprints, v.BGP.RouterID
				if out[i].Services == nil {
					out[i].Services = []bgp.ServiceFingerprint{}
				}
			}
		}()
	}
	wg.Wait()
	for ref := range clients {
		if !slices.Contains(refs, ref) {
			delete(clients, ref)
		}
	}
	r.peersMu.Lock()
	r.others = out
	r.peersMu.Unlock()
}
