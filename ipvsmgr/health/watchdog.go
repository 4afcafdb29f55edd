package health

import (
	"time"
)

// Progress is the checks' own health at one moment: whether every check has
// run once since the start, and whether any round is behind its schedule.
type Progress struct {
	At     time.Time
	Checks int // checked (service, real server) pairs
	Probes int // distinct checks run (pairs with the same target and check share one)
	// NotRun is how many pairs have no result since the start.
	NotRun int
	// Late is how many distinct checks have a round late by more than
	// their interval now; Worst is the greatest lateness (0: none behind
	// its schedule), of WorstTarget's WorstType check.
	Late                   int
	Worst                  time.Duration
	WorstTarget, WorstType string
	// LateRounds counts the rounds found late since the start (each once).
	LateRounds uint64
	// OldestRun is the age of the oldest last result (0: none has one).
	OldestRun time.Duration
}

// lateness is how far p's next round is behind its schedule at now (0 or
// less: not behind): a run under way is due to have ended an interval
// after it began, or at its timeout if that is longer; a waiting one at
// its next run time.
func (p *probe) lateness(now time.Time) time.Duration {
	due := p.next
	if !p.started.IsZero() {
		due = p.started.Add(max(p.interval(), p.spec.Timeout))
	}
	return now.Sub(due)
}

// late says a lateness counts: more than the check's interval.
func (p *probe) late(by time.Duration) bool { return by > p.spec.Interval }

// begin marks p's run as started at start, counting its round if it
// starts late (a round the watchdog did not see late is counted here).
func (r *Runner) begin(p *probe, start time.Time) {
	if !p.lateTold && p.late(p.lateness(start)) {
		r.lateRounds++
	}
	p.started, p.lateTold = start, false
}

// Progress reports the checks' health now, and counts the rounds it finds
// late (the daemon's watchdog calls it every second).
func (r *Runner) Progress() Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	c := Progress{At: now, Checks: len(r.members), Probes: len(r.probes)}
	for _, p := range r.probes {
		if p.lastAt.IsZero() {
			c.NotRun += len(p.members)
		}
		c.OldestRun = max(c.OldestRun, p.lastAge(now))
		by := p.lateness(now)
		if !p.late(by) {
			continue
		}
		c.Late++
		if !p.lateTold {
			p.lateTold = true
			r.lateRounds++
		}
		if by > c.Worst {
			c.Worst, c.WorstTarget, c.WorstType = by, p.spec.Target.String(), p.spec.Type
		}
	}
	c.LateRounds = r.lateRounds
	return c
}

// Clock is the clock the runner schedules by (the watchdog ticks on it).
func (r *Runner) Clock() Clock { return r.clock }

// SetClock replaces the runner's clock (tests); call it before Update and Run.
func (r *Runner) SetClock(c Clock) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clock = c
	_, r.realTime = c.(realClock)
}
