package kernel

import (
	"errors"
	"os"
	"testing"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// On a kernel without ip_vs (these build machines), Open must fail with a
// clear error, never panic or hang. It never loads the module: a test on a
// developer's host leaves its kernel as it found it (the VM tier covers
// loading, and a kernel with ip_vs).
func TestOpenWithoutIPVSIsAClearError(t *testing.T) {
	if _, err := os.Stat(procIPVS); err == nil {
		testenv.Elsewhere(t, "scripts/vmtest TestNoIPVSModuleIsAClearError, in a fresh VM", "this kernel has ip_vs loaded")
	}
	_, err := Open(Options{LoadModule: false})
	if !errors.Is(err, ipvsmgr.ErrIPVSUnavailable) {
		t.Fatalf("want ErrIPVSUnavailable, got %v", err)
	}
	if _, err := os.Stat(procIPVS); err == nil {
		t.Fatal("Open without LoadModule loaded ip_vs")
	}
	t.Logf("error shown to the user: %v", err)
}
