package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// A run of forward deltas (as the daemon writes), whole documents between
// them (as apply writes), and every revision read back exactly; the chain is
// bounded; a whole write equal to the current state makes no revision.
func TestForwardDeltas(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st := &ipvsmgr.State{}
	for i := range 20 {
		st.Services = append(st.Services, ipvsmgr.Service{Name: fmt.Sprint("s", i), Address: fmt.Sprintf("198.18.0.%d", i+1), Port: 80,
			Servers: []ipvsmgr.Server{{Address: "198.18.1.1"}, {Address: "198.18.1.2"}}})
	}
	want := map[int64]string{}
	rev, _, err := s.Commit(ctx, 0, st, "t", "cli", "first")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := Encode(st)
	want[rev] = string(doc)
	wholes := 0
	for step := range 80 {
		w := step
		st.Services[step%20].Servers[0].Weight = &w
		_, enc, _ := EncodeServices(st)
		from := make([]int, len(enc))
		for j := range from {
			from[j] = j
		}
		from[step%20] = -1
		delta, err := ForwardDelta(st, enc, from)
		if err != nil {
			t.Fatal(err)
		}
		if len(delta) > len(doc)/4 {
			t.Fatalf("a forward delta of %d bytes for a document of %d", len(delta), len(doc))
		}
		next, err := s.CommitForward(ctx, rev, delta, "t", "api", fmt.Sprint("step ", step))
		if errors.Is(err, ErrWholeNeeded) {
			wholes++
			next, _, err = s.Commit(ctx, rev, st, "t", "api", "whole")
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		rev = next
		doc, _ = Encode(st)
		want[rev] = string(doc)
		if step == 40 { // an apply in the middle: a whole document
			st.Settings.TCPTimeout = 900
			if rev, _, err = s.Commit(ctx, rev, st, "t", "cli", "apply"); err != nil {
				t.Fatal(err)
			}
			doc, _ = Encode(st)
			want[rev] = string(doc)
		}
	}
	if wholes != 2 {
		t.Errorf("%d whole documents forced by the chain bound in 80 deltas, want 2", wholes)
	}
	if _, err := s.CommitForward(ctx, rev-1, []byte(`{}`), "t", "api", "stale"); !errors.As(err, new(*StaleError)) {
		t.Errorf("a forward delta on a stale base: %v", err)
	}
	for id, doc := range want {
		r, err := s.Revision(ctx, id)
		if err != nil {
			t.Fatalf("revision %d: %v", id, err)
		}
		got, _ := Encode(r.State)
		if string(got) != doc {
			t.Fatalf("revision %d read back differs", id)
		}
	}
	cur, curRev, err := s.Current(ctx)
	if err != nil || curRev != rev {
		t.Fatalf("current: %v at %d, want %d", err, curRev, rev)
	}
	if got, _ := Encode(cur); string(got) != want[rev] {
		t.Fatal("current state differs from the last revision written")
	}
	// The current revision is a delta: a whole write of the same state is no change.
	if again, changed, err := s.Commit(ctx, rev, cur, "t", "cli", "same"); err != nil || changed || again != rev {
		t.Fatalf("same state again: rev %d changed %v err %v", again, changed, err)
	}
	// And a different one is stored whole after it, the chain still readable.
	cur.Services = cur.Services[:3]
	last, changed, err := s.Commit(ctx, rev, cur, "t", "cli", "smaller")
	if err != nil || !changed {
		t.Fatal(err)
	}
	if r, err := s.Revision(ctx, rev); err != nil {
		t.Fatal(err)
	} else if got, _ := Encode(r.State); string(got) != want[rev] {
		t.Fatal("the last forward revision changed after a whole one was written")
	}
	if r, err := s.Revision(ctx, last); err != nil || len(r.State.Services) != 3 {
		t.Fatalf("whole after forward: %v", err)
	}
}
