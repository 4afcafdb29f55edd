package panel

import (
	"fmt"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

// directorsCard is the settings page's Directors card: how this director
// takes part in replication between directors (a pair's peer, a source or
// a follower), whom it believes on that link, and on a source each
// follower's lag and error and the directors it refused. Read-only: these
// are node settings (ipvsctl node set).
type directorsCard struct {
	Shown     bool
	Facts     []fact
	Followers []followerRow
}

type followerRow struct {
	Name, Fingerprint, State, StateClass, Seen, Error string
}

func directorsCardOf(node *server.NodeView, followers []server.FollowerStatus, now time.Time) *directorsCard {
	c := &directorsCard{}
	if node == nil {
		return c
	}
	mode := node.Replication
	if mode == "" {
		mode = server.ReplicationPair
	}
	c.Shown = mode != server.ReplicationPair || node.PeerCA != "" || len(node.FollowerFingerprints) > 0 || len(followers) > 0
	if !c.Shown {
		return c
	}
	add := func(label, format string, a ...any) {
		c.Facts = append(c.Facts, fact{label, fmt.Sprintf(format, a...)})
	}
	switch mode {
	case server.ReplicationSource:
		add("Replication", "source: edits are made here, followers take them")
	case server.ReplicationFollower:
		add("Replication", "follower of %s: local edits are refused", noneIfEmpty(node.PeerURL))
	default:
		add("Replication", "pair: follows %s", noneIfEmpty(node.PeerURL))
	}
	add("This director's certificate", "%s", noneIfEmpty(node.Fingerprint))
	if node.PeerFingerprint != "" {
		add("Peer pinned", "%s", node.PeerFingerprint)
	}
	if len(node.FollowerFingerprints) > 0 {
		add("Followers pinned", "%s", strings.Join(node.FollowerFingerprints, ", "))
	}
	if node.PeerCA != "" {
		add("Pair CA", "%s", node.PeerCA)
	}
	if r := node.Redundancy; r != nil && r.Replication != nil {
		add("Desired state", "%s", replicationFact(r.Replication))
	}
	for _, f := range followers {
		row := followerRow{Name: f.Name, Fingerprint: f.Fingerprint, Error: f.Error,
			Seen: now.Sub(f.LastSeen).Round(time.Second).String() + " ago"}
		if f.Address != f.Name {
			row.Name += " (" + f.Address + ")"
		}
		switch {
		case f.Refused:
			row.State, row.StateClass = "refused", "st-down"
		case f.InSync:
			row.State, row.StateClass = "in sync", "st-up"
		default:
			row.State, row.StateClass = fmt.Sprintf("%.1f s behind", f.LagSeconds), "st-degraded"
		}
		if f.Connected {
			row.Seen = "connected"
		}
		c.Followers = append(c.Followers, row)
	}
	return c
}
