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
	// StartDelay is how late every check started since the start, against
	// its schedule.
	StartDelay Delays
}

// DelayBounds are the upper bounds of Delays' buckets, in seconds: from a
// millisecond (a batch's own spread) to 5 s (rounds missed).
var DelayBounds = [...]float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5}

// Delays counts durations in DelayBounds' buckets, as a Prometheus
// histogram does.
type Delays struct {
	// Counts[i] is how many were at most DelayBounds[i] and more than the
	// bound before; the last, more than every bound.
	Counts [len(DelayBounds) + 1]uint64
	Count  uint64
	Sum    time.Duration
}

func (d *Delays) add(v time.Duration) {
	v = max(v, 0)
	i := 0
	for i < len(DelayBounds) && v.Seconds() > DelayBounds[i] {
		i++
	}
	d.Counts[i]++
	d.Count++
	d.Sum += v
}

// Quantile estimates the q-quantile (0 < q < 1) as Prometheus'
// histogram_quantile does: linearly within its bucket, and the last bound
// when it falls beyond it. 0 with nothing counted.
func (d *Delays) Quantile(q float64) time.Duration {
	rank := q * float64(d.Count)
	var below uint64
	for i, c := range d.Counts {
		if c == 0 || float64(below+c) < rank {
			below += c
			continue
		}
		if i == len(DelayBounds) {
			break
		}
		lo := 0.0
		if i > 0 {
			lo = DelayBounds[i-1]
		}
		s := lo + (DelayBounds[i]-lo)*(rank-float64(below))/float64(c)
		return time.Duration(s * float64(time.Second))
	}
	if d.Count == 0 {
		return 0
	}
	return time.Duration(DelayBounds[len(DelayBounds)-1] * float64(time.Second))
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
	by := p.lateness(start)
	if !p.lateTold && p.late(by) {
		r.lateRounds++
	}
	r.startDelay.add(by)
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
	c.LateRounds, c.StartDelay = r.lateRounds, r.startDelay
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
