package server

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

// One rendering per snapshot however many ask; while a new one is made,
// the others get the last one at once.
func TestRenderedOncePerSnapshot(t *testing.T) {
	var r Rendered
	builds := 0
	build := func(s string) func() ([]byte, error) {
		return func() ([]byte, error) { builds++; return []byte(s), nil }
	}
	s1 := &Snapshot{At: time.Now()}
	for range 5 {
		if b, _ := r.Get(RenderKey{Snap: s1}, build("one")); string(b) != "one" {
			t.Fatalf("got %q", b)
		}
	}
	if builds != 1 {
		t.Fatalf("%d renderings of one snapshot", builds)
	}
	s2 := &Snapshot{At: time.Now()}
	started, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = r.Get(RenderKey{Snap: s2}, func() ([]byte, error) { close(started); <-release; return []byte("two"), nil })
	})
	<-started
	if b, _ := r.Get(RenderKey{Snap: s2}, build("again")); string(b) != "one" {
		t.Errorf("while the new one is made: %q, want the last one", b)
	}
	close(release)
	wg.Wait()
	if b, _ := r.Get(RenderKey{Snap: s2}, build("again")); string(b) != "two" {
		t.Errorf("after: %q", b)
	}
	if b, _ := r.Get(RenderKey{Snap: s2, Stale: true}, build("stale")); string(b) != "stale" {
		t.Errorf("a snapshot gone stale is rendered again: %q", b)
	}
}

// The daemon counts its reads through a wrapper: the sync daemons of the
// driver behind it are still found.
func TestSyncDaemonsFoundThroughTheReadCounter(t *testing.T) {
	fk := &syncFake{}
	var reads atomic.Int64
	if syncDaemonsOf(&countedKernel{Kernel: fk, reads: &reads}) != fk {
		t.Fatal("the counted kernel hides its driver's sync daemons")
	}
	if syncDaemonsOf(fakekernel.New()) != nil {
		t.Fatal("a kernel without sync daemons has some")
	}
}

type syncFake struct {
	*fakekernel.Kernel
	fakekernel.SyncDaemons
}
