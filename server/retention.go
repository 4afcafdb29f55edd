package server

import (
	"context"
	"time"

	"github.com/ipvsctl/ipvsctl/server/store"
)

// runRetention prunes the records that grow without a change being made
// (the audit, the health transitions, ended sessions) as r says, at once
// and then every period, until ctx ends.
func (c *Core) runRetention(ctx context.Context, r store.Retention, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		p, err := c.store.Prune(ctx, r, c.now())
		switch {
		case err != nil && ctx.Err() == nil:
			c.log.Error("prune the audit and health records", "err", err)
		case p.Audit+p.Transitions+p.Sessions+p.Events > 0:
			c.log.Info("pruned old records", "audit_rows", p.Audit, "health_transitions", p.Transitions, "sessions", p.Sessions, "events", p.Events,
				"max_age", r.MaxAge.String(), "max_bytes", r.MaxBytes)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
