package ipvsmgr_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

var (
	fastVIP  = ipvsmgr.VIP{Interface: "eth0", Addr: netip.MustParseAddr("198.18.0.100")}
	otherVIP = ipvsmgr.VIP{Interface: "eth0", Addr: netip.MustParseAddr("198.18.0.101")}
)

// hostLog is one transcript of what the host was told and what the ledger
// was saved with, in order: "ip addr add ...", "save vips=[...] intent=[...]".
type hostLog struct {
	fakekernel.Ledger
	host    *fakekernel.Host
	mu      sync.Mutex
	lines   []string
	failing int // saves to fail from now
}

func newHostLog() *hostLog { return &hostLog{host: fakekernel.NewHost()} }

func (l *hostLog) SaveLedger(ctx context.Context, led *ipvsmgr.Ledger) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, l.host.Ops()...)
	if l.failing > 0 {
		l.failing--
		l.lines = append(l.lines, "save failed")
		return errors.New("database is locked")
	}
	l.lines = append(l.lines, fmt.Sprintf("save vips=%s intent=%s", addrs(led.VIPs), addrs(led.Intent)))
	return l.Ledger.SaveLedger(ctx, led)
}

// take is the transcript since the last take, the host's latest changes last.
func (l *hostLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append(l.lines, l.host.Ops()...)
	l.lines = nil
	return out
}

func addrs(vs []ipvsmgr.VIP) string {
	var s []string
	for _, v := range vs {
		s = append(s, v.Addr.String())
	}
	return "[" + strings.Join(s, " ") + "]"
}

func (l *hostLog) reconciler() *ipvsmgr.Reconciler {
	return &ipvsmgr.Reconciler{Kernel: fakekernel.New(), Host: l.host, Ledger: l, Log: slog.New(slog.DiscardHandler)}
}

// desired is a redundant director's state with its role laid over it, as
// the daemon's overlay makes it: carried VIPs as master, standing by else.
func desired(master bool, vips ...ipvsmgr.VIP) *ipvsmgr.Desired {
	d := &ipvsmgr.Desired{Table: &ipvsmgr.Table{}, Settings: ipvsmgr.Settings{Redundancy: &ipvsmgr.Redundancy{VRID: 51, Interface: "eth0"}}}
	if master {
		d.VIPs = vips
	} else {
		d.Standby = vips
	}
	return d
}

func (l *hostLog) expect(t *testing.T, what string, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, l.take()); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

func reconcile(t *testing.T, r *ipvsmgr.Reconciler, d *ipvsmgr.Desired) {
	t.Helper()
	res, err := r.Reconcile(context.Background(), d)
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("reconcile: %v %+v", err, res)
	}
}

// backupWithIntent is a backup's reconciler whose ledger's intent has
// fastVIP, and the transcript after it.
func backupWithIntent(t *testing.T) (*hostLog, *ipvsmgr.Reconciler) {
	t.Helper()
	l := newHostLog()
	r := l.reconciler()
	reconcile(t, r, desired(false, fastVIP))
	l.take()
	return l, r
}

func takeOver(t *testing.T, r *ipvsmgr.Reconciler, l *hostLog, vips ...ipvsmgr.VIP) {
	t.Helper()
	ctx := context.Background()
	record, fails := r.AddVIPs(ctx, vips)
	if fails != nil {
		t.Fatal(fails)
	}
	l.expect(t, "the takeover, before its record", "ip addr add 198.18.0.100 dev eth0")
	if f := record(ctx); f != nil {
		t.Fatal(f)
	}
}

// A backup records in its ledger's intent, ahead of a takeover, the VIPs it
// would carry as master; the takeover then adds them with no write before
// (the advert and gratuitous ARPs wait on nothing else), and its record
// follows. Losing mastership removes them and keeps the intent.
func TestTakeoverAddsIntentVIPsBeforeAnyWrite(t *testing.T) {
	ctx := context.Background()
	l := newHostLog()
	r := l.reconciler()
	reconcile(t, r, desired(false, fastVIP))
	l.expect(t, "a backup's reconcile", "save vips=[] intent=[198.18.0.100]")
	reconcile(t, r, desired(false, fastVIP))
	l.expect(t, "the same again: nothing written")

	takeOver(t, r, l, fastVIP)
	l.expect(t, "the record", "save vips=[198.18.0.100] intent=[198.18.0.100]")
	reconcile(t, r, desired(true, fastVIP))
	l.expect(t, "the master's reconcile: nothing to change")

	if f := r.RemoveVIPs(ctx, []ipvsmgr.VIP{fastVIP}); f != nil {
		t.Fatal(f)
	}
	l.expect(t, "mastership lost", "ip addr del 198.18.0.100 dev eth0", "save vips=[] intent=[198.18.0.100]")
	reconcile(t, r, desired(false, fastVIP))
	l.expect(t, "backup again: nothing written")
}

// Between a takeover's add and its record the reconciler is held: a
// reconcile that comes then (the role's, a write's) waits, and sees the
// VIPs recorded as ipvsctl's.
func TestReconcileWaitsForTheTakeoversRecord(t *testing.T) {
	ctx := context.Background()
	l, r := backupWithIntent(t)
	record, _ := r.AddVIPs(ctx, []ipvsmgr.VIP{fastVIP})
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Reconcile(ctx, desired(false, fastVIP)) // mastership lost at once
	}()
	select {
	case <-done:
		t.Fatal("a reconcile ran between the takeover and its record")
	case <-time.After(50 * time.Millisecond):
	}
	record(ctx)
	<-done
	l.expect(t, "the record, then the reconcile", "ip addr add 198.18.0.100 dev eth0",
		"save vips=[198.18.0.100] intent=[198.18.0.100]", "ip addr del 198.18.0.100 dev eth0", "save vips=[] intent=[198.18.0.100]")
}

// A VIP the intent does not have yet (a service added since the last
// reconcile) is recorded as ipvsctl's before it is added, as before.
func TestTakeoverRecordsAVIPOutsideTheIntentFirst(t *testing.T) {
	ctx := context.Background()
	l, r := backupWithIntent(t)
	record, fails := r.AddVIPs(ctx, []ipvsmgr.VIP{fastVIP, otherVIP})
	if fails != nil {
		t.Fatal(fails)
	}
	l.expect(t, "the takeover", "ip addr add 198.18.0.100 dev eth0",
		"save vips=[198.18.0.101] intent=[198.18.0.100]", "ip addr add 198.18.0.101 dev eth0")
	record(ctx)
	l.expect(t, "the record", "save vips=[198.18.0.101 198.18.0.100] intent=[198.18.0.100]")
	reconcile(t, r, desired(true, fastVIP, otherVIP))
	l.expect(t, "the next reconcile puts the new VIP in the intent", "save vips=[198.18.0.100 198.18.0.101] intent=[198.18.0.100 198.18.0.101]")
}

// An address ipvsctl did not add is never removed: one up before the
// intent is recorded stays out of it; one put up by hand after it leaves
// the intent at the next reconcile (or at a takeover that finds it up).
func TestIntentLeavesOutAddressesOfOthers(t *testing.T) {
	ctx := context.Background()
	l := newHostLog()
	l.host.AddVIP(otherVIP) // the operator's, before ipvsctl looked
	r := l.reconciler()
	reconcile(t, r, desired(false, fastVIP, otherVIP))
	l.expect(t, "the intent without the operator's", "save vips=[] intent=[198.18.0.100]")

	l.host.AddVIP(fastVIP) // by hand, after the intent was recorded
	reconcile(t, r, desired(false, fastVIP, otherVIP))
	l.expect(t, "someone else's now: out of the intent", "save vips=[] intent=[]")

	record, fails := r.AddVIPs(ctx, []ipvsmgr.VIP{fastVIP, otherVIP})
	if fails != nil {
		t.Fatal(fails)
	}
	record(ctx)
	if f := r.RemoveVIPs(ctx, []ipvsmgr.VIP{fastVIP, otherVIP}); f != nil {
		t.Fatal(f)
	}
	reconcile(t, r, desired(false, fastVIP, otherVIP))
	l.expect(t, "a takeover and its loss: neither address touched, nothing written")
	for _, v := range []ipvsmgr.VIP{fastVIP, otherVIP} {
		if up, _ := l.host.HasVIP(ctx, v); !up {
			t.Errorf("someone else's %s was removed", v)
		}
	}

	// Up at a takeover although the intent had it: someone else's.
	l2, r2 := backupWithIntent(t)
	l2.host.AddVIP(fastVIP)
	record, _ = r2.AddVIPs(ctx, []ipvsmgr.VIP{fastVIP})
	record(ctx)
	r2.RemoveVIPs(ctx, []ipvsmgr.VIP{fastVIP})
	l2.expect(t, "found up by the takeover", "save vips=[] intent=[]")
	if up, _ := l2.host.HasVIP(ctx, fastVIP); !up {
		t.Error("someone else's address was removed")
	}
}

// A crash between a takeover's add and its record: the next process's
// first reconcile, on a director that is not master, removes the intent's
// VIPs that are up (before it speaks VRRP, in the daemon), and only those.
func TestStartAfterACrashRemovesIntentVIPsThatAreUp(t *testing.T) {
	ctx := context.Background()
	l := newHostLog()
	reconcile(t, l.reconciler(), desired(false, fastVIP, otherVIP))
	l.expect(t, "the intent", "save vips=[] intent=[198.18.0.100 198.18.0.101]")
	record, _ := l.reconciler().AddVIPs(ctx, []ipvsmgr.VIP{fastVIP})
	_ = record // the process dies before it records
	foreign := ipvsmgr.VIP{Interface: "eth0", Addr: netip.MustParseAddr("198.18.0.102")}
	l.host.AddVIP(foreign)
	l.take()

	r := l.reconciler() // the restarted process
	p, err := r.Plan(ctx, desired(false, fastVIP, otherVIP, foreign))
	if err != nil || strings.Join(p.Host, "; ") != "ip addr del 198.18.0.100 dev eth0" {
		t.Errorf("plan: %v %v", p.Host, err)
	}
	reconcile(t, r, desired(false, fastVIP, otherVIP, foreign))
	l.expect(t, "the restart's first reconcile", "ip addr del 198.18.0.100 dev eth0", "save vips=[] intent=[198.18.0.100 198.18.0.101]")
	if up, _ := l.host.HasVIP(ctx, foreign); !up {
		t.Error("an address ipvsctl did not add was removed")
	}
	// As master instead, the restarted process keeps it as its own.
	l.host.AddVIP(fastVIP)
	l.take()
	r = l.reconciler()
	reconcile(t, r, desired(true, fastVIP, otherVIP))
	l.expect(t, "a restart as master", "ip addr add 198.18.0.101 dev eth0",
		"save vips=[198.18.0.100 198.18.0.101] intent=[198.18.0.100 198.18.0.101]")
}

// A record that fails to save leaves the VIPs ipvsctl's in memory: losing
// mastership still removes them, and the next save catches the ledger up.
func TestFailedRecordKeepsTheVIPsOwned(t *testing.T) {
	ctx := context.Background()
	l, r := backupWithIntent(t)
	record, _ := r.AddVIPs(ctx, []ipvsmgr.VIP{fastVIP})
	l.failing = 1
	if f := record(ctx); len(f) != 1 {
		t.Fatalf("record: %v", f)
	}
	reconcile(t, r, desired(true, fastVIP))
	l.expect(t, "the next reconcile records it", "ip addr add 198.18.0.100 dev eth0", "save failed",
		"save vips=[198.18.0.100] intent=[198.18.0.100]")
	l.failing = 1
	record, _ = r.AddVIPs(ctx, []ipvsmgr.VIP{fastVIP})
	record(ctx)
	if f := r.RemoveVIPs(ctx, []ipvsmgr.VIP{fastVIP}); len(f) != 1 {
		t.Fatalf("remove: %v", f)
	}
	l.expect(t, "removed though its save failed", "ip addr del 198.18.0.100 dev eth0", "save failed")
	reconcile(t, r, desired(false, fastVIP))
	l.expect(t, "caught up", "save vips=[] intent=[198.18.0.100]")
}

// Without settings.redundancy there is no takeover, so no intent.
func TestNoIntentWithoutRedundancy(t *testing.T) {
	l := newHostLog()
	r := l.reconciler()
	reconcile(t, r, &ipvsmgr.Desired{Table: &ipvsmgr.Table{}, VIPs: []ipvsmgr.VIP{fastVIP}})
	l.expect(t, "a lone director", "ip addr add 198.18.0.100 dev eth0", "save vips=[198.18.0.100] intent=[]")
}
