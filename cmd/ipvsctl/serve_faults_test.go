package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A fault injection point that names no takeover step stops serve before it
// starts anything, saying which variable and value, and which steps there are.
func TestServeRefusesAnUnknownKillStep(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	r := runWith(t, map[string]string{"IPVSCTL_FAULT_KILL_AT": "after-garp"}, "--db", db, "serve", "--listen", "")
	want := `ipvsctl serve: IPVSCTL_FAULT_KILL_AT: "after-garp" is not a takeover step (vip-added, before-ledger, sync-switch)`
	if r.code != exitUsage || !strings.Contains(r.stderr, want) {
		t.Fatalf("serve with IPVSCTL_FAULT_KILL_AT=after-garp: exit %d, stderr %q; want %d with %q", r.code, r.stderr, exitUsage, want)
	}
}
