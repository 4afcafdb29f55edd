package server

import (
	"sync/atomic"
	"time"
)

// CheckerStatus is the health checker's own health: whether the director
// is ready (every check has run once since the start, and a reconcile has
// laid the results on the kernel; with no checks, the first reconcile),
// and whether any round of checks is behind its schedule.
type CheckerStatus struct {
	Ready   bool       `json:"ready"`
	ReadyAt *time.Time `json:"ready_at,omitempty"`
	// Waiting says what readiness waits for ("3 of 10 checks have not run
	// yet", "the first reconcile"); empty once ready.
	Waiting string `json:"waiting,omitempty"`
	// Checks are the checked (service, real server) pairs, Distinct the
	// checks run for them (pairs with the same target and check share one).
	Checks   int `json:"checks"`
	Distinct int `json:"distinct_checks"`
	// NotRun is how many pairs have no result since the start.
	NotRun int `json:"not_run"`
	// Late is how many distinct checks have a round late by more than their
	// interval now; WorstLate is the greatest lateness, of WorstTarget's check.
	Late        int     `json:"late"`
	WorstLate   float64 `json:"worst_late_seconds"`
	WorstTarget string  `json:"worst_target,omitempty"`
	// LateRounds counts the rounds found late since the start.
	LateRounds uint64 `json:"late_rounds"`
	// OldestRunAge is the age of the oldest last result, in seconds.
	OldestRunAge float64 `json:"oldest_run_age_seconds"`
	// StartDelay is how late the checks started against their schedule,
	// every run since the daemon started.
	StartDelay StartDelay `json:"start_delay"`
}

// StartDelay is a histogram of how late checks started, in seconds, with
// its median and 99th percentile estimated as histogram_quantile does.
type StartDelay struct {
	Count      uint64  `json:"count"`
	SumSeconds float64 `json:"sum_seconds"`
	P50        float64 `json:"p50_seconds"`
	P99        float64 `json:"p99_seconds"`
	// Buckets are cumulative: the runs that started at most LE seconds late.
	Buckets []DelayBucket `json:"buckets"`
}

// DelayBucket is one of StartDelay's buckets.
type DelayBucket struct {
	LE    float64 `json:"le"`
	Count uint64  `json:"count"`
}

// checkerState is where the daemon's watchdog reports (SetChecker).
type checkerState struct {
	f atomic.Pointer[func() *CheckerStatus]
}

// CheckerStatus is the health checker's own health; nil where no daemon
// runs the checks.
func (c *Core) CheckerStatus() *CheckerStatus {
	if f := c.checker.f.Load(); f != nil {
		return (*f)()
	}
	return nil
}
