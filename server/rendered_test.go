package server

import (
	"sync"
	"testing"
	"time"
)

// One rendering per snapshot however many ask; while a new one is made,
// the others get the last one at once.
func TestRenderedOncePerSnapshot(t *testing.T) {
	var r Rendered[[]byte]
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

// Only a newer snapshot is worth not waiting for: while a rendering is
// made, a key whose revision, reconciles, health, results or staleness
// moved waits for it, and gets a rendering of data at least as new, never
// the last one: that one if it covers the key (a newer snapshot of the
// same counts covers a stale one), else its own, made after it.
func TestRenderedWaitsForEveryOtherChange(t *testing.T) {
	s := &Snapshot{At: time.Now()}
	base := RenderKey{Snap: s, Rev: 3, Reconciles: 5, Health: 7, Results: 9}
	moved := map[string]RenderKey{}
	for name, f := range map[string]func(k *RenderKey){
		"revision": func(k *RenderKey) { k.Rev++ }, "reconcile": func(k *RenderKey) { k.Reconciles++ },
		"health": func(k *RenderKey) { k.Health++ }, "results": func(k *RenderKey) { k.Results++ },
		"stale": func(k *RenderKey) { k.Stale = true },
	} {
		k := base
		f(&k)
		moved[name] = k
	}
	for name, k := range moved {
		var r Rendered[string]
		if b, _ := r.Get(base, func() (string, error) { return "old", nil }); b != "old" {
			t.Fatal(b)
		}
		started, release := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			_, _ = r.Get(RenderKey{Snap: &Snapshot{At: time.Now()}, Rev: 3, Reconciles: 5, Health: 7, Results: 9},
				func() (string, error) { close(started); <-release; return "newer snapshot", nil })
		})
		<-started
		got := make(chan string, 1)
		builds := 0
		go func() {
			b, _ := r.Get(k, func() (string, error) { builds++; return "new", nil })
			got <- b
		}()
		select {
		case b := <-got:
			t.Errorf("%s moved while another rendering was made: got %q at once, want a wait", name, b)
		case <-time.After(50 * time.Millisecond):
		}
		close(release)
		wg.Wait()
		want, wantBuilds := "new", 1
		if name == "stale" {
			want, wantBuilds = "newer snapshot", 0
		}
		if b := <-got; b != want || builds != wantBuilds {
			t.Errorf("%s moved while another rendering was made: got %q after %d builds of its own, want %q after %d", name, b, builds, want, wantBuilds)
		}
	}
	var r Rendered[string]
	for i := range 3 {
		if b, _ := r.Get(RenderKey{Rev: int64(i)}, func() (string, error) { return itoaTest(i), nil }); b != itoaTest(i) {
			t.Errorf("without a snapshot nothing is kept: %q", b)
		}
	}
}

func itoaTest(i int) string { return string(rune('0' + i)) }

// Twenty requests of a key that moved while nothing is kept yet, or after a
// change, make one rendering between them, not twenty: each waits for the
// one under way and takes it when it covers its key.
func TestRenderedOneBuildAtATime(t *testing.T) {
	var r Rendered[int]
	var mu sync.Mutex
	building, most, builds := 0, 0, 0
	build := func() (int, error) {
		mu.Lock()
		building++
		builds++
		most = max(most, building)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		building--
		mu.Unlock()
		return builds, nil
	}
	s := &Snapshot{At: time.Now()}
	for round, key := range []RenderKey{{Snap: s, Reconciles: 1}, {Snap: s, Reconciles: 2}} {
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				if _, err := r.Get(key, build); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if most != 1 || builds != round+1 {
			t.Errorf("round %d: %d renderings at once at most, %d in all; want 1 at a time, %d in all", round, most, builds, round+1)
		}
	}
}
