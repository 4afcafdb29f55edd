package redundancy

import (
	"context"

	"github.com/ipvsctl/ipvsctl/server/replication"
)

// followPeer starts, restarts or stops replication as the node settings say.
func (r *redRunner) followPeer(ctx context.Context) {
	r.mu.Lock()
	cur := r.rep
	r.mu.Unlock()
	want := r.node.PeerURL
	if cur != nil && cur.Follows(want, r.node.PeerToken, r.node.PeerFingerprint, r.node.AllowReplicatedExec) {
		return
	}
	r.stopReplication()
	if want == "" {
		return
	}
	if r.h.Peer == nil {
		r.log.Warn("node peer_url is set but this daemon cannot reach peers; no replication", "peer", want)
		return
	}
	p, err := r.h.Peer(want, r.node.PeerToken, r.node.PeerFingerprint)
	if err != nil {
		r.log.Error("replication peer", "peer", want, "err", err)
		return
	}
	rep := replication.Start(ctx, replication.Config{Core: r.c, Store: r.store, Log: r.log.With("peer", want), Peer: p,
		URL: want, Token: r.node.PeerToken, Fingerprint: r.node.PeerFingerprint, AllowExec: r.node.AllowReplicatedExec})
	r.mu.Lock()
	r.rep = rep
	r.mu.Unlock()
	r.log.Info("replication follows the peer", "peer", want)
}

func (r *redRunner) stopReplication() {
	r.mu.Lock()
	rep := r.rep
	r.rep = nil
	r.mu.Unlock()
	if rep != nil {
		rep.Stop()
	}
}
