package server

import (
	"context"
	"fmt"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
)

// TuneView is the director's tuning check: each setting against what the
// desired state and the load call for (`ipvsctl tune check`, the panel's
// Tuning page).
type TuneView struct {
	Load     tune.Load      `json:"load"`
	Findings []tune.Finding `json:"findings"`
	Summary  string         `json:"summary"`
	FarOff   bool           `json:"far_off"`
	At       time.Time      `json:"at"`
}

// Tuning checks this director's settings. In the daemon the load is the
// kernel snapshot's (its connections and their rate, no read of the
// connection table); without one it is measured from /proc.
func (c *Core) Tuning(ctx context.Context) (*TuneView, error) {
	st, _, err := c.State(ctx)
	if err != nil {
		return nil, err
	}
	h := c.tuneHost
	if h == nil {
		h = tune.DirHost{Root: "/"}
	}
	snap := c.Snapshot()
	var r *tune.Reading
	var load tune.Load
	if snap != nil && snap.Table != nil {
		if r, err = tune.ReadSettings(h); err != nil {
			return nil, fmt.Errorf("read the director's settings: %w", err)
		}
		load = snapshotLoad(snap)
	} else {
		if r, err = tune.Read(h); err != nil {
			return nil, fmt.Errorf("read the director's settings: %w", err)
		}
		load = tune.MeasuredLoad(r)
	}
	fs := tune.Check(r, st, load)
	return &TuneView{Load: load, Findings: fs, Summary: tune.Summary(fs), FarOff: tune.FarOff(fs), At: c.now()}, nil
}

// snapshotLoad is the load the kernel's counters show: every real server's
// active and inactive connections, and the services' new connections a
// second; an entry's lifetime follows by Little's law.
func snapshotLoad(s *Snapshot) tune.Load {
	l := tune.Load{From: fmt.Sprintf("the kernel snapshot of %s: connections and conns/s of every service", s.At.UTC().Format("15:04:05"))}
	var rate uint64
	for _, vs := range s.Table.Services {
		rate += vs.Stats.CPS
		for _, d := range vs.Dests {
			l.Conns += int(d.ActiveConns) + int(d.InactiveConns)
		}
	}
	l.ConnRate = float64(rate)
	if rate > 0 {
		l.Lifetime = float64(l.Conns) / l.ConnRate
	}
	return l
}
