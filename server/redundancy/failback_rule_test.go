package redundancy

import (
	"strings"
	"testing"
	"time"
)

// What a due preemption waits for, step by step: the backup sync daemon,
// a first count, then the master's count when it is fresh, else the own
// count until it has stopped rising for catchUpQuiet.
func TestCatchUpWaitsFor(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	var c catchUp
	steps := []struct {
		at      time.Duration
		running bool
		own     int64
		master  *int64 // heard at that time
		err     string // the question's failure at that time
		want    string // a part of what it waits for; "" nothing
	}{
		{0, false, -1, nil, "", "the backup sync daemon to start"},
		{time.Second, true, -1, nil, "", "the first count of this director's connections"},
		{2 * time.Second, true, 0, nil, "", "to stop rising for 3s (0 at the last count; the master's count: not asked yet)"},
		{3 * time.Second, true, 40, ptr(100), "", "the master's 100 active connections (40 at the last count)"},
		{4 * time.Second, true, 100, nil, "", ""}, // the master's count of 1 s ago, reached
		// The master's count is stale (over 3 s): the own count rules, rising at 7 s.
		{7 * time.Second, true, 120, nil, "connection refused", "to stop rising for 3s (120 at the last count; the master's count: connection refused)"},
		{9 * time.Second, true, 120, nil, "", "still"}, // rose 2 s ago
		{10 * time.Second, true, 119, nil, "", ""},     // 3 s without a rise
		// The sync daemon stopped (this director became master) and started again: from the start.
		{11 * time.Second, false, 119, nil, "", "the backup sync daemon to start"},
		{12 * time.Second, true, 119, nil, "", "(119 at the last count"},
	}
	for _, s := range steps {
		now := at(s.at)
		if s.master != nil {
			c.master, c.masterAt, c.masterErr = *s.master, now, ""
		}
		if s.err != "" {
			c.masterErr = s.err
		}
		c.observe(now, s.running, s.own)
		got := c.waitFor(now)
		want := s.want
		if want == "still" {
			want = "to stop rising"
		}
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("at %s: waits for %q, want %q", s.at, got, s.want)
		}
	}
}

func ptr(n int64) *int64 { return &n }
