package redundancy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

// A director that returns and would preempt its master first waits, up to
// settings.redundancy.preempt_sync_wait, until its backup sync daemon has
// the master's connections: taking the VIP before then would break every
// established connection the kernel has no entry for (keepalived #1138,
// #1966). What it waits for is the master's count of active connections,
// asked of the peer it follows (its API's node status); without one, until
// its own count has stopped rising for catchUpQuiet.
const (
	catchUpQuiet = 3 * time.Second
	// masterCountFresh is how old the master's count may be to be compared.
	masterCountFresh = 3 * time.Second
	// askEvery spaces the questions to the peer while a preemption is due.
	askEvery = time.Second
)

// catchUp follows the backup sync daemon's progress (the runner's goroutine
// only, but master* is written by the question to the peer, under r.mu).
type catchUp struct {
	syncSince time.Time // the backup sync daemon seen running since (zero: not running)
	own       int64     // active connections in this director's table, as last read (-1: none read)
	rose      time.Time // when own last rose
	master    int64     // the master's active connections, as last heard
	masterAt  time.Time // when (zero: never)
	masterErr string    // why the master's count is not known
	asked     time.Time
	asking    bool
	why       string // what the instances were last told to wait for
}

// observe takes this director's own count (-1: no snapshot) and whether its
// backup sync daemon runs.
func (c *catchUp) observe(now time.Time, syncRunning bool, own int64) {
	switch {
	case !syncRunning:
		c.syncSince, c.own, c.rose = time.Time{}, -1, time.Time{}
		return
	case c.syncSince.IsZero():
		c.syncSince = now
	}
	if own > c.own {
		c.rose = now
	}
	c.own = own
}

// waitFor is what a due preemption still waits for at now ("": nothing).
func (c *catchUp) waitFor(now time.Time) string {
	switch {
	case c.syncSince.IsZero():
		return "the backup sync daemon to start"
	case c.own < 0:
		return "the first count of this director's connections"
	case !c.masterAt.IsZero() && now.Sub(c.masterAt) <= masterCountFresh:
		if c.own >= c.master {
			return ""
		}
		return fmt.Sprintf("the sync daemon to have the master's %d active connections (%d at the last count)", c.master, c.own)
	case now.Sub(c.syncSince) < catchUpQuiet || now.Sub(c.rose) < catchUpQuiet:
		why := c.masterErr
		if why == "" {
			why = "not asked yet"
		}
		return fmt.Sprintf("the sync daemon's count of active connections to stop rising for %s (%d at the last count; the master's count: %s)",
			catchUpQuiet, c.own, why)
	}
	return ""
}

// activeConns is the sum of the active connections of every real server in
// the snapshot's table (-1: no table read yet).
func activeConns(snap *server.Snapshot) int64 {
	if snap == nil || snap.Table == nil {
		return -1
	}
	var n int64
	for _, s := range snap.Table.Services {
		for _, d := range s.Dests {
			n += int64(d.ActiveConns)
		}
	}
	return n
}

// followFailback tells each VRRP instance what a preemption waits for: the
// backup sync daemon catching up with the master (nothing without the sync
// daemon, preemption or preempt_sync_wait).
func (r *redRunner) followFailback(ctx context.Context, red *ipvsmgr.Redundancy) {
	wait := red.SyncWait()
	r.mu.Lock()
	insts := slices.Collect(maps.Values(r.insts))
	_, backupSync := r.syncStarted[ipvsmgr.SyncBackup]
	r.mu.Unlock()
	due := false
	for _, ri := range insts {
		due = due || ri.inst.Status().PreemptDue
	}
	now := time.Now()
	r.mu.Lock()
	r.cu.observe(now, backupSync, activeConns(r.sk.Snapshot()))
	why := ""
	if wait > 0 {
		if due && !r.cu.asking && now.Sub(r.cu.asked) >= askEvery {
			r.cu.asking, r.cu.asked = true, now
			go r.askMasterCount(ctx)
		}
		why = r.cu.waitFor(now)
	}
	changed := why != r.cu.why
	r.cu.why = why
	r.mu.Unlock()
	for _, ri := range insts {
		ri.inst.SetPreemptHold(wait, why)
	}
	if changed && due {
		if why != "" {
			r.log.Info("a preemption waits for the sync daemon", "waits_for", why, "at_most", wait.String())
		} else {
			r.log.Info("the sync daemon caught up: the preemption goes ahead")
		}
	}
}

// askMasterCount asks the peer this director follows (in a pair, the
// master it would preempt) for its count of active connections.
func (r *redRunner) askMasterCount(ctx context.Context) {
	n, err := r.masterCount(ctx)
	r.mu.Lock()
	r.cu.asking = false
	if err != nil {
		r.cu.masterErr = err.Error()
	} else {
		r.cu.master, r.cu.masterAt, r.cu.masterErr = n, time.Now(), ""
	}
	r.mu.Unlock()
	r.poke()
}

func (r *redRunner) masterCount(ctx context.Context) (int64, error) {
	r.mu.Lock()
	rep, url := r.rep, r.node.PeerURL
	r.mu.Unlock()
	if rep == nil {
		return 0, fmt.Errorf("no peer_url to ask")
	}
	ctx, cancel := context.WithTimeout(ctx, askEvery)
	defer cancel()
	v, err := rep.Peer().NodeSettings(ctx)
	switch {
	case err != nil:
		return 0, err
	case v.Redundancy == nil || v.Redundancy.SyncDaemon.ActiveConnections == nil:
		return 0, fmt.Errorf("the peer at %s tells no count of connections", url)
	}
	return *v.Redundancy.SyncDaemon.ActiveConnections, nil
}
