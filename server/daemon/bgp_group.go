package daemon

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// fingerprints puts this director's Maglev-input fingerprints in the
// status (from the kernel's table as the poller read it: the order mh
// walks) and compares them with every other director's it knows: the one
// it follows, the others that one passed on, and the followers that
// report here. A director not heard from for bgp.StaleAfter is stale: not
// compared, and shown so.
func (r *bgpRunner) fingerprints(desired *ipvsmgr.Desired, snap *server.Snapshot, st *server.BGPStatus) {
	if snap != nil && snap.Table != nil {
		st.Fingerprints = bgp.Fingerprints(desired, snap.Table)
	}
	r.peersMu.Lock()
	heard, self := slices.Clone(r.others), bgp.Self{RouterID: st.RouterID, Certificate: r.selfCert}
	r.peersMu.Unlock()
	st.Directors = bgp.Group(self, heard, r.d.Core.FingerprintReports())
	bgp.Age(st.Directors, time.Now(), bgp.StaleAfter)
	st.Mismatches = bgp.Compare(st.Fingerprints, st.Directors)
	st.Mismatch = len(st.Mismatches) > 0
	st.Directors = bgp.WithoutInputs(st.Directors) // GET /bgp, /node, /status: fingerprints, not what others digest
}

// BGPPeerPoll is how often a director reports its fingerprints to the one
// it follows (and hears every other's back).
const BGPPeerPoll = 5 * time.Second

// DirectorPeer is the director this one follows, as the fingerprint
// exchange reaches it (package client's peer Client, over the mutual TLS
// of the node settings).
type DirectorPeer interface {
	ReportFingerprints(ctx context.Context, rep server.FingerprintReport) (*server.FingerprintSet, error)
}

// directorRef is another director of the BGP group, as this one knows it.
type directorRef struct{ url, token, fingerprint, ca string }

// dial is how ref is reached, with the trust the node settings give it.
func (ref directorRef) dial() server.PeerDial {
	return server.PeerDialOf(store.Node{PeerURL: ref.url, PeerToken: ref.token, PeerFingerprint: ref.fingerprint, PeerCA: ref.ca})
}

// otherDirectors are the directors this one reports to: the one it
// follows (node set --peer-url: the source, or a pair's other director),
// with its token and pinned fingerprint. The source has none: its
// followers report to it.
func otherDirectors(n store.Node) []directorRef {
	if n.PeerURL == "" {
		return nil
	}
	return []directorRef{{url: n.PeerURL, token: n.PeerToken, fingerprint: n.PeerFingerprint, ca: n.PeerCA}}
}

// heardFrom is what a director this one reports to said last: of itself,
// and of the others that report to it.
type heardFrom struct {
	self   bgp.DirectorFingerprints
	others []bgp.DirectorFingerprints
}

// askDirectors reports to the directors this one follows every
// BGPPeerPoll until ctx ends.
func (r *bgpRunner) askDirectors(ctx context.Context) {
	clients := map[directorRef]DirectorPeer{}
	heard := map[directorRef]*heardFrom{}
	tick := time.NewTicker(BGPPeerPoll)
	defer tick.Stop()
	for {
		if _, desired := r.d.sk.newest(); desired != nil && desired.Settings.BGP != nil {
			r.askOnce(ctx, clients, heard)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// report is what this director says of itself: its latest fingerprints.
func (r *bgpRunner) report() server.FingerprintReport {
	st := r.d.Core.BGPStatus()
	if st == nil {
		return server.FingerprintReport{Error: "its BGP runner has not looked at its kernel yet"}
	}
	rep := server.FingerprintReport{RouterID: st.RouterID, Services: st.Fingerprints}
	if rep.Services == nil {
		rep.Services = []bgp.ServiceFingerprint{}
	}
	if b, err := json.Marshal(rep); err == nil && len(b) > server.MaxReportBody {
		// Past the report's cap with what it digests: the fingerprints
		// alone (the mismatch then says where to read this one's inputs).
		rep.Services = bgp.WithoutInputs([]bgp.DirectorFingerprints{{Services: rep.Services}})[0].Services
	}
	return rep
}

func (r *bgpRunner) askOnce(ctx context.Context, clients map[directorRef]DirectorPeer, heard map[directorRef]*heardFrom) {
	node, err := r.d.store.Node(ctx)
	if err != nil {
		return
	}
	refs := otherDirectors(node)
	rep := r.report()
	var wg sync.WaitGroup
	for _, ref := range refs {
		h := heard[ref]
		if h == nil {
			h = &heardFrom{self: bgp.DirectorFingerprints{Director: ref.url, Address: ref.url}}
			heard[ref] = h
		}
		cl, ok := clients[ref]
		if !ok {
			if r.d.Directors == nil {
				h.self.Error = "this daemon cannot reach other directors"
				continue
			}
			c, err := r.d.Directors(ref.dial())
			if err != nil {
				h.self.Error = err.Error()
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
			set, err := cl.ReportFingerprints(actx, rep)
			if err != nil {
				h.self.Error = "report to it and hear its fingerprints: " + err.Error()
				return // what it passed on before stays, and ages
			}
			h.heard(ref.url, set, time.Now())
		}()
	}
	wg.Wait()
	var all []bgp.DirectorFingerprints
	for ref, h := range heard {
		if !slices.Contains(refs, ref) {
			delete(heard, ref)
			delete(clients, ref)
			continue
		}
		all = append(all, h.self)
		all = append(all, h.others...)
	}
	self := r.d.Core.Fingerprint()
	r.peersMu.Lock()
	r.others, r.selfCert = all, self
	r.peersMu.Unlock()
}

// heard takes the answer of the director at url: its own fingerprints,
// and the others' with their age there.
func (h *heardFrom) heard(url string, set *server.FingerprintSet, now time.Time) {
	h.self = set.Self
	h.self.Director, h.self.Address, h.self.Via, h.self.ReportedAt = url, url, "", now
	h.others = h.others[:0]
	for _, o := range set.Others {
		o.Via, o.Stale = url, false
		o.ReportedAt = now.Add(-time.Duration(o.AgeSeconds * float64(time.Second)))
		h.others = append(h.others, o)
	}
}
