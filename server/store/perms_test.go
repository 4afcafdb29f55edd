package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A database, WAL and shared-memory file left readable by others (made by
// an older version, a copy, a restore) are their owner's only after Open.
func TestOpenForcesOwnerOnlyModes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ipvsctl.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteAudit(ctx, AuditEntry{Actor: "a", Via: "cli", Action: "x", Outcome: OutcomeSuccess}); err != nil {
		t.Fatal(err)
	}
	files := []string{path, path + "-wal", path + "-shm"}
	for _, f := range files {
		if err := os.Chmod(f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	defer s.Close()
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v after Open, want 0600", filepath.Base(f), fi.Mode().Perm())
		}
	}
}
