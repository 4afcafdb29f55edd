package daemon

import (
	"context"
	"sync"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// cachedLedger keeps the daemon's ledger in memory: the daemon is the only
// writer of the kernel, hence of the ledger, so every reconcile after the
// first need not read and decode it from the database. The reconcile treats
// the ledger it loads as read-only and saves a new one.
type cachedLedger struct {
	ipvsmgr.LedgerStore
	mu sync.Mutex
	l  *ipvsmgr.Ledger
}

func (c *cachedLedger) LoadLedger(ctx context.Context) (*ipvsmgr.Ledger, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.l == nil {
		l, err := c.LedgerStore.LoadLedger(ctx)
		if err != nil {
			return nil, err
		}
		c.l = l
	}
	return c.l, nil
}

func (c *cachedLedger) SaveLedger(ctx context.Context, l *ipvsmgr.Ledger) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.LedgerStore.SaveLedger(ctx, l); err != nil {
		c.l = nil // read it again next time
		return err
	}
	c.l = l
	return nil
}
