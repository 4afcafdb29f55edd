package auth

import (
	"context"
	"sync"
)

// hashSlots bounds the argon2id computations that run at once: each takes
// Params.Memory, so the slots are what bounds the memory passwords take.
// It counts what it let through, so that the bound is checked on the slots
// themselves rather than on the process's memory.
type hashSlots struct {
	ch      chan struct{}
	mu      sync.Mutex
	running int
	peak    int
	hashes  int64
}

func newHashSlots(n int) *hashSlots { return &hashSlots{ch: make(chan struct{}, n)} }

// acquire waits for a slot; the caller calls release once its hash is done.
func (s *hashSlots) acquire(ctx context.Context) (release func(), err error) {
	select {
	case s.ch <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	s.running++
	s.peak = max(s.peak, s.running)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.running--
		s.mu.Unlock()
		<-s.ch
	}, nil
}

// counted is called by a slot's holder as it starts an argon2id computation.
func (s *hashSlots) counted() {
	s.mu.Lock()
	s.hashes++
	s.mu.Unlock()
}

// HashStats is what the hashing slots let through: Peak is the most that
// ever held a slot at once (never more than Slots), Hashes the argon2id
// computations made in them since start.
type HashStats struct {
	Slots, Running, Peak int
	Hashes               int64
}

// HashStats reads the hashing slots' counters.
func (a *Auth) HashStats() HashStats {
	s := a.hashes
	s.mu.Lock()
	defer s.mu.Unlock()
	return HashStats{Slots: cap(s.ch), Running: s.running, Peak: s.peak, Hashes: s.hashes}
}
