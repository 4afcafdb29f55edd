package server

import (
	"sync"
	"time"
)

// Rendered keeps the last rendering of a view of the snapshot (the status
// document, the metrics' exposition) so that any number of clients cost one
// rendering per snapshot. While a new one is made, the others get the last
// one at once instead of waiting for it.
type Rendered struct {
	mu       sync.Mutex
	key      RenderKey
	body     []byte
	building bool
}

// RenderKey says what a rendering was made from.
type RenderKey struct {
	Snap  *Snapshot
	Stale bool // the snapshot was stale when rendered: a rendering says so
}

// KeyNow is the key of a rendering of the current snapshot.
func (c *Core) KeyNow() RenderKey {
	s := c.Snapshot()
	return RenderKey{Snap: s, Stale: s == nil || time.Since(s.At) > 2*PollInterval}
}

// Get returns the rendering for key, made by build when there is none.
func (r *Rendered) Get(key RenderKey, build func() ([]byte, error)) ([]byte, error) {
	r.mu.Lock()
	if r.body != nil && key.Snap != nil && (r.key == key || r.building) {
		body := r.body
		r.mu.Unlock()
		return body, nil
	}
	r.building = true
	r.mu.Unlock()
	body, err := build()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.building = false
	if err != nil {
		return nil, err
	}
	r.key, r.body = key, body
	return body, nil
}
