package auth

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// loginGuard decides whether a password may be checked now. Failures are
// counted three ways, so that no third party can lock a user out:
//   - per (user, client address): LoginFailures within LoginWindow lock that
//     pair, for LoginWindow, doubling on each repeat up to an hour;
//   - per client address, whatever the user: 4x as many lock the address
//     (a sprayer of many names);
//   - per user, from every address: past 2x LoginFailures the user is slowed
//     down (one attempt per 1 s, 2 s, ... up to 30 s) from addresses it never
//     logged in from; an address the user did log in from is never slowed,
//     so failures elsewhere do not keep the real user out.
type loginGuard struct {
	pair, addr *limiter
	slowAfter  int
	window     time.Duration
	// successes bounds a user's successful logins within window: a
	// password one knows checked over and over costs hashes too.
	successes int
	wins      map[string][]time.Time
	checking  map[string]int // user -> its attempts admitted and not yet done

	mu    sync.Mutex
	users map[string]*slowdown
	known map[string]map[string]bool // user -> address keys it logged in from
	// loggedInFrom looks further back than this process (the audit).
	loggedInFrom func(ctx context.Context, user, addr string) bool
}

type slowdown struct {
	fails []time.Time
	next  time.Time
}

const (
	maxSlowdown   = 30 * time.Second
	maxKnownAddrs = 16
)

func newLoginGuard(failures, successes int, window time.Duration, loggedInFrom func(ctx context.Context, user, addr string) bool) *loginGuard {
	return &loginGuard{
		successes: successes, wins: map[string][]time.Time{}, checking: map[string]int{},
		pair:      newLimiter(failures, window, time.Hour),
		addr:      newLimiter(4*failures, window, time.Hour),
		slowAfter: 2 * failures, window: window,
		users: map[string]*slowdown{}, known: map[string]map[string]bool{}, loggedInFrom: loggedInFrom,
	}
}

func pairKey(user, addr string) string { return nameKey(user) + " " + addrKey(addr) }

// admit says how long this attempt must wait (0: check the password now,
// then call done). An admitted attempt counts against its pair at once (a
// success forgets it), and against the user's successes until done, so
// that attempts checked side by side cannot pass either limit; one
// from an unknown address takes the user's next slot while slowed down.
// reason is "" for failures, else why the attempt waits.
func (g *loginGuard) admit(ctx context.Context, user, addr string, now time.Time) (wait time.Duration, reason string) {
	if wait := max(g.pair.blocked(pairKey(user, addr), now), g.addr.blocked(addrKey(addr), now)); wait > 0 {
		return wait, ""
	}
	if wait := g.slowdown(ctx, user, addr, now); wait > 0 {
		return wait, ""
	}
	if wait := g.tooManySuccesses(user, now); wait > 0 {
		return wait, g.successesReason()
	}
	g.pair.fail(pairKey(user, addr), now)
	return 0, ""
}

// lockedFor is how long user from addr (or addr alone) is locked out: past
// a failure, more than 0 only when that failure locked it (no attempt is
// admitted while locked).
func (g *loginGuard) lockedFor(user, addr string, now time.Time) time.Duration {
	return max(g.pair.blocked(pairKey(user, addr), now), g.addr.blocked(addrKey(addr), now))
}

// successesReason is why an attempt past the successes bound is refused.
func (g *loginGuard) successesReason() string {
	return fmt.Sprintf("%d successful logins of this user within %s", g.successes, g.window)
}

// tooManySuccesses says how long user must wait when it logged in
// successes times within the window already, counting its attempts being
// checked as successes (0: it may try, and is counted as being checked).
func (g *loginGuard) tooManySuccesses(user string, now time.Time) time.Duration {
	return g.successesWait(user, now, true)
}

// successesWait is tooManySuccesses that counts an attempt it lets through
// as being checked only when count is set: without, it only asks (before
// an attempt waits for a hashing slot, so that one past the bound does not
// wait for a slot to be refused).
func (g *loginGuard) successesWait(user string, now time.Time, count bool) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := recentTimes(g.wins[user], now, g.window)
	g.wins[user] = w
	if len(w)+g.checking[user] < g.successes {
		if count {
			g.checking[user]++
		}
		return 0
	}
	if len(w) == 0 { // only its attempts being checked: one is done within a hash
		return time.Second
	}
	return max(w[0].Add(g.window).Sub(now), time.Second)
}

// done ends an admitted attempt (after succeeded or failed, or an error).
func (g *loginGuard) done(user string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.checking[user]--; g.checking[user] <= 0 {
		delete(g.checking, user)
	}
}

func recentTimes(ts []time.Time, now time.Time, window time.Duration) []time.Time {
	kept := ts[:0]
	for _, t := range ts {
		if now.Sub(t) < window {
			kept = append(kept, t)
		}
	}
	return kept
}

func (g *loginGuard) slowdown(ctx context.Context, user, addr string, now time.Time) time.Duration {
	g.mu.Lock()
	s := g.users[user]
	slowed := s != nil && len(s.recent(now, g.window)) >= g.slowAfter
	known := g.known[user][addrKey(addr)]
	g.mu.Unlock()
	if !slowed || known || (g.loggedInFrom != nil && g.loggedInFrom(ctx, user, addr)) {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Before(s.next) {
		return s.next.Sub(now)
	}
	over := len(s.fails) - g.slowAfter
	s.next = now.Add(min(time.Second<<min(over, 5), maxSlowdown))
	return 0
}

func (s *slowdown) recent(now time.Time, window time.Duration) []time.Time {
	kept := s.fails[:0]
	for _, t := range s.fails {
		if now.Sub(t) < window {
			kept = append(kept, t)
		}
	}
	s.fails = kept
	return kept
}

// failed counts a wrong password (its pair counted it when admitted).
func (g *loginGuard) failed(user, addr string, now time.Time) {
	g.addr.fail(addrKey(addr), now)
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.users[user]
	if s == nil {
		if len(g.users) >= maxKeys {
			for k, v := range g.users {
				if len(v.recent(now, g.window)) == 0 {
					delete(g.users, k)
				}
			}
		}
		s = &slowdown{}
		g.users[user] = s
	}
	s.recent(now, g.window)
	if len(s.fails) < 4*g.slowAfter { // enough to know the user is under attack
		s.fails = append(s.fails, now)
	} else {
		s.fails = append(s.fails[1:], now)
	}
}

// succeeded forgets the pair's failures and remembers the address as the
// user's.
func (g *loginGuard) succeeded(user, addr string, now time.Time) {
	g.pair.reset(pairKey(user, addr))
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.wins[user]; !ok && len(g.wins) >= maxKeys {
		for k, v := range g.wins {
			if len(recentTimes(v, now, g.window)) == 0 {
				delete(g.wins, k)
			}
		}
	}
	g.wins[user] = append(recentTimes(g.wins[user], now, g.window), now)
	k := g.known[user]
	if k == nil {
		if len(g.known) >= maxKeys {
			clear(g.known)
		}
		k = map[string]bool{}
		g.known[user] = k
	}
	if len(k) >= maxKnownAddrs {
		clear(k)
	}
	k[addrKey(addr)] = true
}
