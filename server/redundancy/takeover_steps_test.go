package redundancy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server/redundancy"
)

// The takeover steps the fault matrix kills a daemon at come once each, vip-added
// first, each where its name says: at vip-added the VIP is up and the ledger holds
// only the intent (no advert or gratuitous ARP out yet); at before-ledger the
// announcements are out and the ledger still lacks the VIP; at sync-switch
// the announcements are out too (the runner's tick used to switch the sync
// daemon before them), the backup sync daemon stopped and no master one
// running yet.
func TestTakeoverStepsComeWhereNamed(t *testing.T) {
	ctx := context.Background()
	h := &hub{}
	a, b := pairOf(t, 200, 100)
	var mu sync.Mutex
	var seen []string
	var from atomic.Int64 // b's log before the takeover watched
	announced := func() bool { return strings.Contains(b.logs.String()[from.Load():], "fake: announced") }
	b.atStep = func(st redundancy.TakeoverStep) {
		l, err := b.st.LoadLedger(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		running, _ := b.sd.ListSyncDaemons(ctx)
		var syncd []string
		for _, d := range running {
			syncd = append(syncd, d.State.String())
		}
		var what string
		switch st { // what the step's name says, nothing of the steps that run beside it
		case redundancy.StepVIPAdded:
			what = fmt.Sprintf("vip %v, ledger vips %d, intent %d, announced %v, sync daemons %v",
				b.hasVIP(), len(l.VIPs), len(l.Intent), announced(), syncd)
		case redundancy.StepBeforeLedger:
			what = fmt.Sprintf("vip %v, ledger vips %d, announced %v", b.hasVIP(), len(l.VIPs), announced())
		case redundancy.StepSyncSwitch:
			what = fmt.Sprintf("vip %v, announced %v, sync daemons %v", b.hasVIP(), announced(), syncd)
		}
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, string(st)+": "+what)
	}
	a.start(h, quiet())
	b.start(h, nil)
	eventually(t, 10*time.Second, "a master, b backup with its backup sync daemon", func() bool {
		running, _ := b.sd.ListSyncDaemons(ctx)
		return a.role() == "master" && b.role() == "backup" && len(running) == 1
	})
	mu.Lock()
	seen = nil // b may have taken over once at the start, before it heard a
	mu.Unlock()
	from.Store(int64(len(b.logs.String())))
	a.stop()
	eventually(t, 5*time.Second, "b master, its three steps passed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return b.role() == "master" && len(seen) >= 3
	})
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	// The ledger write and the sync daemon's switch both follow the
	// announcements, side by side: their order is not fixed.
	want := []string{
		"before-ledger: vip true, ledger vips 0, announced true",
		"sync-switch: vip true, announced true, sync daemons []",
		"vip-added: vip true, ledger vips 0, intent 1, announced false, sync daemons [backup]",
	}
	if len(seen) == 0 || !strings.HasPrefix(seen[0], "vip-added:") {
		t.Errorf("the first step is not vip-added: %q", seen)
	}
	seen = slices.Sorted(slices.Values(seen))
	if !slices.Equal(seen, want) {
		t.Errorf("the steps of b's takeover:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}
