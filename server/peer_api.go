package server

import (
	"context"
	"time"

	"github.com/ipvsctl/ipvsctl/server/store"
)

// PeerState is the other director's current revision as its API serves it
// to replication: the stored document, when and by whom it was made, its
// hash, and the director's name for itself.
type PeerState struct {
	store.Head
	Node string
}

// Peer is the other director's API, as replication uses it (package client).
type Peer interface {
	// WaitState answers the peer's current revision as soon as it is newer
	// than after, or after about 25 s anyway; me is what this director has
	// (the source shows it in its status).
	WaitState(ctx context.Context, after int64, me FollowerReport) (*PeerState, error)
	// NodeSettings is the peer's node view: a returning director asks it
	// for the master's count of connections (preempt_sync_wait).
	NodeSettings(ctx context.Context) (*NodeView, error)
}

// LongPollWait is how long GET /api/v1/state?after=N waits for a newer revision.
const LongPollWait = 25 * time.Second

// WaitHead returns the current revision as soon as it is newer than after,
// or after wait (or when the daemon stops) whatever it is. Revisions are
// looked for every 50 ms: a change reaches a waiting peer within that.
func (c *Core) WaitHead(ctx context.Context, after int64, wait time.Duration) (*store.Head, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		rev, err := c.store.CurrentRevision(ctx)
		if err != nil {
			return nil, err
		}
		if rev > after {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.red.pollsDone:
		case <-deadline.C:
		case <-tick.C:
			continue
		}
		break
	}
	return c.store.Head(ctx)
}

// NodeName is how this director names itself to its peer: its node address,
// else what the caller knows it as.
func (c *Core) NodeName(ctx context.Context) string {
	n, err := c.store.Node(ctx)
	if err != nil {
		return ""
	}
	return n.Address
}
