package store

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/arpguard"
)

// A real server's record keeps the target it was last pushed with across
// results saved without one (a verify of the desired state, an undo).
func TestRealServerRecordsKeepTheirTarget(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	spec := &arpguard.Target{RIP: netip.MustParseAddr("198.18.0.11"), Interface: "bond0", Mode: arpguard.ModeDRSysctl,
		VIPs: []netip.Addr{netip.MustParseAddr("198.18.0.100")}}
	pushed := arpguard.Result{Target: "198.18.0.11:22", Host: "198.18.0.11:22", Action: "push", State: arpguard.StatePrepared, At: at}
	if err := s.SaveRealServerRecords(ctx, []RealServerRecord{{Result: pushed, Spec: spec}}); err != nil {
		t.Fatal(err)
	}
	verified := pushed
	verified.Action, verified.State, verified.Drift, verified.At = "verify", arpguard.StateDrift, []string{"VIP 198.18.0.100 missing on lo"}, at.Add(time.Hour)
	if err := s.SaveResults(ctx, []arpguard.Result{verified}); err != nil {
		t.Fatal(err)
	}
	recs, err := s.RealServerRecords(ctx)
	if err != nil || len(recs) != 1 {
		t.Fatalf("records %+v, err %v", recs, err)
	}
	if r := recs[0]; r.Action != "verify" || r.State != arpguard.StateDrift || r.Spec == nil || r.Spec.Interface != "bond0" {
		t.Errorf("record after a verify without a target: %+v (spec %+v)", r, r.Spec)
	}
	rs, err := s.Results(ctx)
	if err != nil || len(rs) != 1 || rs[0].Summary() != "drift: VIP 198.18.0.100 missing on lo" {
		t.Errorf("results %+v, err %v", rs, err)
	}
}
