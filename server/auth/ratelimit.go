package auth

import (
	"net/netip"
	"sync"
	"time"
)

// limiter counts failed logins per key (a client address, a user name). At
// max failures within window the key is locked for window, then twice as
// long at each repeat up to maxLock; a success clears the key. It is kept in
// memory: a restart forgives, which an attacker cannot cause.
type limiter struct {
	mu      sync.Mutex
	max     int
	window  time.Duration
	maxLock time.Duration
	keys    map[string]*strikes
}

type strikes struct {
	fails       []time.Time
	lockedUntil time.Time
	lockouts    int
	last        time.Time
}

// maxKeys bounds the memory a flood of addresses can take; past it, keys
// with nothing to remember are dropped first.
const maxKeys = 100_000

func newLimiter(max int, window, maxLock time.Duration) *limiter {
	return &limiter{max: max, window: window, maxLock: maxLock, keys: map[string]*strikes{}}
}

// blocked returns how long key must still wait (0: it may try).
func (l *limiter) blocked(key string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.keys[key]; s != nil && now.Before(s.lockedUntil) {
		return s.lockedUntil.Sub(now)
	}
	return 0
}

// fail counts a failure for key.
func (l *limiter) fail(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.keys[key]
	if s == nil {
		if len(l.keys) >= maxKeys {
			l.prune(now)
		}
		s = &strikes{}
		l.keys[key] = s
	}
	if now.Sub(s.last) > l.maxLock {
		s.lockouts = 0 // a long quiet spell starts the back-off again
	}
	s.last = now
	kept := s.fails[:0]
	for _, t := range s.fails {
		if now.Sub(t) < l.window {
			kept = append(kept, t)
		}
	}
	s.fails = append(kept, now)
	if len(s.fails) >= l.max {
		lock := min(l.window<<s.lockouts, l.maxLock)
		s.lockouts++
		s.lockedUntil = now.Add(lock)
		s.fails = nil
	}
}

// reset forgets key (after a successful login).
func (l *limiter) reset(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.keys, key)
}

func (l *limiter) prune(now time.Time) {
	for k, s := range l.keys {
		if !now.Before(s.lockedUntil) && now.Sub(s.last) > l.maxLock {
			delete(l.keys, k)
		}
	}
}

// addrKey is the rate-limit key of a client address: an IPv6 client is
// counted by its /64, which one host usually holds whole.
func addrKey(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return "addr " + addr
	}
	if a.Is6() && !a.Is4In6() {
		p, _ := a.Prefix(64)
		return "addr " + p.String()
	}
	return "addr " + a.String()
}

func nameKey(name string) string { return "user " + name }
