package health

import (
	"sync"
	"time"
)

// Clock is the time the runner schedules by; tests use a fake one.
type Clock interface {
	Now() time.Time
	// Timer returns a channel that receives once the time is at, and a
	// function that stops it.
	Timer(at time.Time) (<-chan time.Time, func())
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Timer(at time.Time) (<-chan time.Time, func()) {
	t := time.NewTimer(time.Until(at))
	return t.C, func() { t.Stop() }
}

// FakeClock is a Clock that moves only when told to.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	c  chan time.Time
}

// NewFakeClock returns a clock stopped at now.
func NewFakeClock(now time.Time) *FakeClock { return &FakeClock{now: now} }

// Now returns the clock's time.
func (f *FakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Timer returns a timer that fires when Advance reaches at.
func (f *FakeClock) Timer(at time.Time) (<-chan time.Time, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := make(chan time.Time, 1)
	if !at.After(f.now) {
		c <- f.now
		return c, func() {}
	}
	f.timers = append(f.timers, fakeTimer{at: at, c: c})
	return c, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, t := range f.timers {
			if t.c == c {
				f.timers = append(f.timers[:i], f.timers[i+1:]...)
				return
			}
		}
	}
}

// Advance moves the clock on by d and fires the timers that are due.
func (f *FakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.timers[:0]
	for _, t := range f.timers {
		if !t.at.After(f.now) {
			t.c <- f.now
			continue
		}
		kept = append(kept, t)
	}
	f.timers = kept
}
