package auth

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// hashSlots bounds the argon2id computations that run at once: each takes
// Params.Memory, so the slots are what bounds the memory passwords take.
// No caller can make another's login wait behind its own: one user, and
// one client address, holds at most all slots but one (one of the two by
// default), so a flood of one account's logins leaves a slot to everyone
// else; checks wait for a slot in one queue, first come first served among
// those allowed one, and the queue is bounded three ways: at most one check
// waiting per user and one per client address (a second is refused at
// once, 429), and at most maxQueue waiting in all. It counts what it let
// through and how many checks each waited behind, so that the bounds are
// checked on the slots themselves rather than on the process's memory or
// the clock.
type hashSlots struct {
	mu       sync.Mutex
	slots    int
	maxQueue int
	running  int
	queue    []*hashWaiter
	byUser   map[string]int // waiting, per user
	byAddr   map[string]int // waiting, per client address
	runUser  map[string]int // running, per user
	runAddr  map[string]int // running, per client address
	peak     int
	qpeak    int
	hashes   int64
	refused  int64
	behind   map[string]int // user -> the most checks one of theirs waited behind
}

type hashWaiter struct {
	user, addr string
	ready      chan struct{}
}

// queueRetry is the Retry-After of a check refused while the slots are busy.
const queueRetry = time.Second

// maxBehindUsers bounds the per-user "waited behind" figures kept.
const maxBehindUsers = 1024

func newHashSlots(n, maxQueue int) *hashSlots {
	return &hashSlots{slots: n, maxQueue: maxQueue, byUser: map[string]int{}, byAddr: map[string]int{},
		runUser: map[string]int{}, runAddr: map[string]int{}, behind: map[string]int{}}
}

// mayRun says whether a check of user's from addr may take a free slot:
// one user, and one address, holds all slots but one at most. An
// authenticated admin's check (user "") has no such bound.
func (s *hashSlots) mayRun(user, addr string) bool {
	if user == "" {
		return true
	}
	most := max(1, s.slots-1)
	return s.runUser[user] < most && (addr == "" || s.runAddr[addr] < most)
}

func (s *hashSlots) run(user, addr string) {
	s.running++
	if user != "" {
		s.runUser[user]++
		if addr != "" {
			s.runAddr[addr]++
		}
	}
}

// acquire waits for a slot for a check of user's password from addr; the
// caller calls release once its hash is done. A user's or an address's
// second waiting check, or one past the queue's bound, is refused with
// *RateLimitError at once. user "" (an admin setting a password, already
// authenticated) is held to no per-key or queue bound, only to the slots.
func (s *hashSlots) acquire(ctx context.Context, user, addr string) (release func(), err error) {
	s.mu.Lock()
	ahead := s.running + len(s.queue)
	// A free slot with checks waiting is one none of them may take (a
	// slot is handed to the first waiter that may run as it frees).
	if s.running < s.slots && s.mayRun(user, addr) {
		s.run(user, addr)
		s.admitted(user, 0)
		s.mu.Unlock()
		return func() { s.release(user, addr) }, nil
	}
	if user != "" {
		var why string
		switch {
		case s.byUser[user] > 0:
			why = fmt.Sprintf("a password check of user %q is already waiting", user)
		case addr != "" && s.byAddr[addr] > 0:
			why = "a password check from " + addr + " is already waiting"
		case len(s.queue) >= s.maxQueue:
			why = fmt.Sprintf("%d password checks are already waiting", len(s.queue))
		}
		if why != "" {
			s.refused++
			s.mu.Unlock()
			return nil, &RateLimitError{RetryAfter: queueRetry, Reason: why}
		}
	}
	w := &hashWaiter{user: user, addr: addr, ready: make(chan struct{})}
	s.queue = append(s.queue, w)
	s.byUser[user]++
	s.byAddr[addr]++
	s.qpeak = max(s.qpeak, len(s.queue))
	s.mu.Unlock()
	select {
	case <-w.ready: // release handed its slot over (run counted it)
		s.mu.Lock()
		s.admitted(user, ahead)
		s.mu.Unlock()
		return func() { s.release(user, addr) }, nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, q := range s.queue {
			if q == w {
				s.queue = append(s.queue[:i], s.queue[i+1:]...)
				s.unqueued(w)
				return nil, ctx.Err()
			}
		}
		// Handed a slot as it gave up: pass it on.
		s.releaseLocked(user, addr)
		return nil, ctx.Err()
	}
}

// admitted records a check that got a slot after waiting behind ahead others.
func (s *hashSlots) admitted(user string, ahead int) {
	s.peak = max(s.peak, s.running)
	if user == "" {
		return
	}
	if _, ok := s.behind[user]; !ok && len(s.behind) >= maxBehindUsers {
		clear(s.behind)
	}
	s.behind[user] = max(s.behind[user], ahead)
}

func (s *hashSlots) unqueued(w *hashWaiter) {
	for m, k := range map[*map[string]int]string{&s.byUser: w.user, &s.byAddr: w.addr} {
		if (*m)[k]--; (*m)[k] <= 0 {
			delete(*m, k)
		}
	}
}

func (s *hashSlots) release(user, addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(user, addr)
}

// releaseLocked frees the slot a check of user's from addr held and hands
// it to the first check waiting that may run.
func (s *hashSlots) releaseLocked(user, addr string) {
	s.running--
	if user != "" {
		for m, k := range map[*map[string]int]string{&s.runUser: user, &s.runAddr: addr} {
			if (*m)[k]--; (*m)[k] <= 0 {
				delete(*m, k)
			}
		}
	}
	for i, w := range s.queue {
		if s.mayRun(w.user, w.addr) {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			s.unqueued(w)
			s.run(w.user, w.addr)
			close(w.ready)
			return
		}
	}
}

// counted is called by a slot's holder as it starts an argon2id computation.
func (s *hashSlots) counted() {
	s.mu.Lock()
	s.hashes++
	s.mu.Unlock()
}

// HashStats is what the hashing slots let through: Peak is the most that
// ever held a slot at once (never more than Slots), Hashes the argon2id
// computations made in them since start; Queued the checks waiting now,
// QueuePeak the most that ever waited at once (never more than MaxQueue),
// Refused the checks refused because one of the same user or address was
// waiting or the queue was full.
type HashStats struct {
	Slots, Running, Peak        int
	Queued, QueuePeak, MaxQueue int
	Hashes, Refused             int64
}

// HashStats reads the hashing slots' counters.
func (a *Auth) HashStats() HashStats {
	s := a.hashes
	s.mu.Lock()
	defer s.mu.Unlock()
	return HashStats{Slots: s.slots, Running: s.running, Peak: s.peak, Queued: len(s.queue), QueuePeak: s.qpeak,
		MaxQueue: s.maxQueue, Hashes: s.hashes, Refused: s.refused}
}

// WaitedBehind is the most password checks that any check of user's (a
// login, a password change) waited behind for its hashing slot, since
// start: at most Slots + MaxQueue - 1, and with one check waiting per user
// at most Slots plus the number of other users waiting.
func (a *Auth) WaitedBehind(user string) int {
	s := a.hashes
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.behind[user]
}
