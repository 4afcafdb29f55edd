package redundancy

import (
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

// wrapped is a kernel behind a wrapper, as the daemon's read counter is.
type wrapped struct{ ipvsmgr.Kernel }

func (w wrapped) Unwrap() ipvsmgr.Kernel { return w.Kernel }

// The sync daemons of a driver behind a wrapper (the daemon's read
// counter) are still found.
func TestSyncDaemonsFoundThroughAWrapper(t *testing.T) {
	fk := &syncFake{}
	if syncDaemonsOf(wrapped{fk}) != fk {
		t.Fatal("the wrapper hides its driver's sync daemons")
	}
	if syncDaemonsOf(fakekernel.New()) != nil {
		t.Fatal("a kernel without sync daemons has some")
	}
}

type syncFake struct {
	*fakekernel.Kernel
	fakekernel.SyncDaemons
}
