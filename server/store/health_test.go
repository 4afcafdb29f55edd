package store

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

func TestHealthTransitions(t *testing.T) {
	s, path := openTemp(t)
	ctx := context.Background()
	r1 := ipvsmgr.ServerRef{
		Service: ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv4, Protocol: ipvsmgr.ProtoTCP, Addr: netip.MustParseAddr("198.18.0.100"), Port: 80},
		Server:  ipvsmgr.DestKey{Addr: netip.MustParseAddr("198.18.0.11"), Port: 80},
	}
	r2 := r1
	r2.Server.Addr = netip.MustParseAddr("2001:db8::12")
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	save := func(ref ipvsmgr.ServerRef, at time.Time, from, to ipvsmgr.HealthState, reason string, weight int) {
		t.Helper()
		tr := HealthTransition{Ref: ref, At: at, From: from, To: to, Reason: reason}
		if weight >= 0 {
			tr.Weight, tr.WeightSet = uint32(weight), true
		}
		if err := s.SaveHealthTransition(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	save(r1, t0, ipvsmgr.HealthUnknown, ipvsmgr.HealthUp, "HTTP 200", 1)
	save(r1, t0.Add(time.Second), ipvsmgr.HealthUp, ipvsmgr.HealthUp, "HTTP 200", -1) // ramp done: weight as configured
	save(r1, t0.Add(time.Minute), ipvsmgr.HealthUp, ipvsmgr.HealthDown, "HTTP 503", -1)
	save(r2, t0, ipvsmgr.HealthUnknown, ipvsmgr.HealthDown, "timeout after 1s", -1)

	// Reopened: the state survives a restart.
	s.Close()
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	cur, err := s2.CurrentHealth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := cur[r1]; got.To != ipvsmgr.HealthDown || got.Reason != "HTTP 503" || !got.At.Equal(t0.Add(time.Minute)) || got.WeightSet {
		t.Errorf("r1 current: %+v", got)
	}
	if got := cur[r2]; got.To != ipvsmgr.HealthDown || got.Reason != "timeout after 1s" || len(cur) != 2 {
		t.Errorf("current: %+v", cur)
	}
	hist, err := s2.HealthHistory(ctx, r1.Service, r1.Server, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 3 || hist[0].Reason != "HTTP 503" || hist[0].From != ipvsmgr.HealthUp || hist[2].Weight != 1 || !hist[2].WeightSet || hist[1].WeightSet {
		t.Errorf("history: %+v", hist)
	}
	// A weight change keeps since; the state did not change.
	s = s2
	save(r2, t0.Add(time.Hour), ipvsmgr.HealthDown, ipvsmgr.HealthDown, "timeout after 1s", 0)
	cur, _ = s.CurrentHealth(ctx)
	if got := cur[r2]; !got.At.Equal(t0) || got.Weight != 0 || !got.WeightSet {
		t.Errorf("r2 after a weight change: %+v", got)
	}
	// The history is bounded per server; others keep theirs.
	for i := range HealthHistoryLimit + 20 {
		to := ipvsmgr.HealthUp
		if i%2 == 1 {
			to = ipvsmgr.HealthDown
		}
		save(r1, t0.Add(time.Duration(i)*time.Hour), ipvsmgr.HealthUnknown, to, "flap "+time.Duration(i).String(), -1)
	}
	hist, _ = s.HealthHistory(ctx, r1.Service, r1.Server, 1000)
	if len(hist) != HealthHistoryLimit || hist[0].Reason != "flap 119ns" || hist[len(hist)-1].Reason != "flap 20ns" {
		t.Errorf("bounded history: %d entries, newest %q, oldest %q", len(hist), hist[0].Reason, hist[len(hist)-1].Reason)
	}
	if h2, _ := s.HealthHistory(ctx, r2.Service, r2.Server, 1000); len(h2) != 2 {
		t.Errorf("r2's history: %d entries, want 2", len(h2))
	}
}
