//go:build linux

package health

import (
	"context"
	"os"
	"sync"
	"time"
)

// waiter is how the connector and the prober wait: on an epoll in the Go
// runtime's poller, whose read deadline is the earliest check's timeout
// (set only when it moves), until ctx's end sets stop. Its fields are
// guarded by its owner's lock.
type waiter struct {
	epoll   *os.File
	waiting time.Time // the deadline set on epoll (zero: none)
	stop    bool      // ctx ended: run ends
}

// setDeadline makes the wait end at t at the latest (zero: no deadline).
func (w *waiter) setDeadline(t time.Time) {
	if !t.Equal(w.waiting) {
		w.waiting = t
		w.epoll.SetReadDeadline(t)
	}
}

// sooner makes the wait end at t if that is before the deadline set.
func (w *waiter) sooner(t time.Time) {
	if w.waiting.IsZero() || t.Before(w.waiting) {
		w.setDeadline(t)
	}
}

// stopOn sets stop and ends the wait when ctx ends; mu is the owner's lock.
func (w *waiter) stopOn(ctx context.Context, mu *sync.Mutex) (stop func() bool) {
	return context.AfterFunc(ctx, func() {
		mu.Lock()
		w.stop = true
		w.setDeadline(time.Unix(1, 0))
		mu.Unlock()
	})
}

// arm sets the next wait's deadline to next's (read under mu): false once
// ctx has ended.
func (w *waiter) arm(mu *sync.Mutex, next func() time.Time) bool {
	mu.Lock()
	defer mu.Unlock()
	if w.stop {
		return false
	}
	w.setDeadline(next())
	return true
}
