package bgp

import (
	"strings"
	"testing"
	"time"
)

func TestDrainWatchWaitsForAQuietWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	w := NewDrainWatch(t0, "prepend", 3, 6*time.Second, 60*time.Second)
	if st := w.Status(at(0.5)); st.Phase != DrainDraining || !strings.Contains(st.Why, "first reading") {
		t.Fatalf("before a reading: %+v", st)
	}
	w.Observe(at(-1), 1000) // the daemon's last reading, made before the drain began
	if st := w.Status(at(0.5)); st.Quiet != 0 || st.Phase != DrainDraining {
		t.Fatalf("a reading before the start: %+v", st)
	}
	w.Observe(at(1), 1000)
	w.Observe(at(3), 1040) // the routers still send: 20/s
	w.Observe(at(3), 5000) // not newer: ignored
	w.Observe(at(5), 1050)
	st := w.Status(at(5))
	if st.Phase != DrainDraining || st.NewConns != 50 || st.Rate != 5 || st.Quiet != 0 {
		t.Fatalf("while flows still come: %+v", st)
	}
	w.Observe(at(7), 1050)
	w.Observe(at(9), 1050)
	if st := w.Status(at(9)); st.Phase != DrainDraining || st.Quiet != 4 || st.Rate != 0 || !strings.Contains(st.Why, "quiet for 4.0 of 6.0 s") {
		t.Fatalf("4 s quiet of 6: %+v", st)
	}
	w.Observe(at(11), 1050)
	st = w.Status(at(11.5))
	if st.Phase != DrainDrained || !st.DrainedAt.Equal(at(11)) || st.NewConns != 50 {
		t.Fatalf("after 6 s quiet: %+v", st)
	}
	// One late connection does not undo a drain that was seen.
	w.Observe(at(13), 1051)
	if st := w.Status(at(13)); st.Phase != DrainDrained || st.NewConns != 51 {
		t.Fatalf("a late connection: %+v", st)
	}
}

// A first reading long after the start (a slow step) is no quiet window:
// nothing was seen of the connections before it.
func TestDrainWatchCountsQuietFromTheFirstReading(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	w := NewDrainWatch(t0, "prepend", 3, 1500*time.Millisecond, 60*time.Second)
	w.Observe(at(2), 1000)
	if st := w.Status(at(2)); st.Phase != DrainDraining || st.Quiet != 0 {
		t.Fatalf("a first reading 2 s in, past the 1.5 s window: %+v", st)
	}
	w.Observe(at(3), 1010)
	w.Observe(at(4), 1010)
	if st := w.Status(at(4)); st.Phase != DrainDraining || st.NewConns != 10 || st.Quiet != 1 {
		t.Fatalf("1 s quiet after connections: %+v", st)
	}
	w.Observe(at(4.5), 1010)
	if st := w.Status(at(4.5)); st.Phase != DrainDrained {
		t.Fatalf("1.5 s quiet: %+v", st)
	}
}

func TestDrainWatchTimesOutWhileFlowsKeepComing(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	w := NewDrainWatch(t0, "prepend", 3, 6*time.Second, 20*time.Second)
	for s := 0; s <= 24; s += 2 {
		w.Observe(t0.Add(time.Duration(s)*time.Second), uint64(100*s))
	}
	st := w.Status(t0.Add(24 * time.Second))
	if st.Phase != DrainTimedOut || st.Rate != 100 || st.NewConns != 2400 || !strings.Contains(st.Why, "no other path") {
		t.Fatalf("flows never stop: %+v", st)
	}
	// A service re-created mid-drain: its counter starts from 0 again, and
	// what it counted since is new.
	w = NewDrainWatch(t0, "withdraw", 0, 6*time.Second, 60*time.Second)
	w.Observe(t0, 900)
	w.Observe(t0.Add(2*time.Second), 30)
	if st := w.Status(t0.Add(2 * time.Second)); st.NewConns != 30 || st.Prepend != 0 || st.Mode != "withdraw" || strings.Contains(st.Why, "no other path") {
		t.Fatalf("a counter reset: %+v", st)
	}
}
