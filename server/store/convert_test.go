package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestMigrationKeepsDrainedWeights opens a database made by the previous
// release's ipvsctl (testdata/release-0009.db, schema 9: made with
// release-0009.json, then "rs drain web r1", "rs set web r2 --weight 7",
// "rs drain web r2", "rs drain web r4", all --no-apply) and finds each
// drained server drained with the weight it had, r3 (configured at weight 0
// from the start) left alone, and the history as it was.
func TestMigrationKeepsDrainedWeights(t *testing.T) {
	ctx := context.Background()
	b, err := os.ReadFile(filepath.Join("testdata", "release-0009.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, _ := s.SchemaVersion(ctx); v < 10 {
		t.Fatalf("schema version %d after open", v)
	}
	st, rev, err := s.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rev != 6 {
		t.Fatalf("current revision %d, want 6 (the migration's)", rev)
	}
	want := map[string]struct {
		weight  int
		drained bool
	}{"r1": {5, true}, "r2": {7, true}, "r3": {0, false}, "r4": {1, true}}
	for _, rs := range st.Services[0].Servers {
		w := want[rs.Name]
		if rs.EffectiveWeight() != w.weight || rs.Drained != w.drained || rs.KernelWeight() != 0 {
			t.Errorf("%s: weight %d drained %v (kernel %d), want weight %d drained %v (kernel 0)",
				rs.Name, rs.EffectiveWeight(), rs.Drained, rs.KernelWeight(), w.weight, w.drained)
		}
	}
	if rs := st.Services[0].Servers[3]; rs.Weight != nil {
		t.Errorf("r4's weight was the default (none given): got %d", *rs.Weight)
	}
	revs, err := s.History(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(revs) != 6 || revs[0].Author != "ipvsctl" || revs[0].Via != "migration" ||
		revs[0].Summary != "migration 0010: drained with their weight kept: web/r1, web/r2, web/r4" {
		t.Fatalf("history: %+v", revs)
	}
	old, err := s.Revision(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range old.State.Services[0].Servers {
		if rs.EffectiveWeight() != 0 || rs.Drained {
			t.Errorf("revision 5 changed: %s weight %d drained %v", rs.Name, rs.EffectiveWeight(), rs.Drained)
		}
	}
	// Opened again: nothing more to convert.
	s.Close()
	if s, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	if _, rev, _ := s.Current(ctx); rev != 6 {
		t.Fatalf("a second open made revision %d", rev)
	}
}
