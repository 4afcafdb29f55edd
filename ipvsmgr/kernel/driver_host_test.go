package kernel

import (
	"errors"
	"os"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// On a kernel without ip_vs (these build machines), Open must fail with a
// clear error, never panic or hang. The VM tier covers a kernel with ip_vs.
func TestOpenWithoutIPVSIsAClearError(t *testing.T) {
	if _, err := os.Stat(procIPVS); err == nil {
		t.Skip("this kernel has ip_vs loaded; the VM tier tests the unloaded case")
	}
	_, err := Open(Options{LoadModule: os.Geteuid() == 0})
	if !errors.Is(err, ipvsmgr.ErrIPVSUnavailable) {
		t.Fatalf("want ErrIPVSUnavailable, got %v", err)
	}
	t.Logf("error shown to the user: %v", err)
}
