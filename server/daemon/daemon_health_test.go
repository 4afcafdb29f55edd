package daemon

import (
	"context"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/health"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// fakeChecks answers each check by its target: pass unless told to fail;
// a target set to hang blocks until the check's context ends.
type fakeChecks struct {
	mu    sync.Mutex
	fail  map[string]string // target -> reason
	hang  bool
	calls int
}

func (f *fakeChecks) set(target, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if reason == "" {
		delete(f.fail, target)
	} else {
		f.fail[target] = reason
	}
}

func (f *fakeChecks) run(ctx context.Context, spec *ipvsmgr.CheckSpec) health.Result {
	f.mu.Lock()
	reason, failing := f.fail[spec.Target.String()]
	hang := f.hang
	f.calls++
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return health.Result{Outcome: health.Fault, Reason: "cancelled", Weight: -1, Percent: -1}
	}
	if failing {
		return health.Result{Outcome: health.Fail, Reason: reason, Weight: -1, Percent: -1}
	}
	return health.Result{Outcome: health.Pass, Reason: "connected", Weight: -1, Percent: -1}
}

type healthRig struct {
	t      *testing.T
	ctx    context.Context
	st     *store.Store
	k      *fakekernel.Kernel
	core   *server.Core
	checks *fakeChecks
	stop   func()
}

func startHealthDaemon(t *testing.T, ctx context.Context, st *store.Store, k *fakekernel.Kernel, checks *fakeChecks) *healthRig {
	t.Helper()
	core := server.New(server.Config{Store: st, OpenKernel: openFake(k, nil)})
	d := New(core, st, slog.New(slog.DiscardHandler))
	// Hours: only a health change can make the reconciles this test waits for.
	d.Interval, d.Poll = time.Hour, time.Hour
	d.Check = checks.run
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	return &healthRig{t: t, ctx: ctx, st: st, k: k, core: core, checks: checks, stop: func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}}
}

// weights is the kernel's real servers of its one service: address -> weight.
func (r *healthRig) weights() map[string]uint32 {
	tbl, _ := r.k.Table(r.ctx)
	out := map[string]uint32{}
	for _, s := range tbl.Services {
		for _, d := range s.Dests {
			out[d.Key.Addr.String()] = d.Weight
		}
	}
	return out
}

func (r *healthRig) waitWeights(what string, want map[string]uint32) {
	r.t.Helper()
	var got map[string]uint32
	for r.ctx.Err() == nil {
		got = r.weights()
		if maps.Equal(got, want) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.t.Fatalf("timed out waiting for %s: kernel has %v, want %v", what, got, want)
}

const checkedDoc = `{"services": [{"name": "web", "address": "198.18.0.100", "port": 80,
  "check": {"type": "tcp", "interval": 0.1, "timeout": 0.1, "rise": 1, "fall": 1, "on_failure": "remove"},
  "sorry_server": {"address": "198.18.0.50"},
  "servers": [{"name": "r1", "address": "198.18.0.11", "weight": 3}, {"name": "r2", "address": "198.18.0.12", "weight": 2}]}]}`

func TestDaemonAppliesHealthAtOnceAndKeepsIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := testStore(t, ctx)
	k := fakekernel.New()
	checks := &fakeChecks{fail: map[string]string{}}
	r := startHealthDaemon(t, ctx, st, k, checks)
	state, err := ipvsmgr.DecodeState(strings.NewReader(checkedDoc))
	if err != nil {
		t.Fatal(err)
	}
	// A write through the core: its own reconcile already uses the health
	// view, so the servers, not checked yet, are out and the sorry server in.
	if _, err := applyState(ctx, r.core, server.Actor{Name: "t", Via: "test"}, state, "test"); err != nil {
		t.Fatal(err)
	}
	r.waitWeights("both servers up after their first pass", map[string]uint32{"198.18.0.11": 3, "198.18.0.12": 2})

	checks.set("198.18.0.12:80", "connection refused")
	r.waitWeights("r2 removed at once", map[string]uint32{"198.18.0.11": 3})

	// An unrelated edit reconciles with the health view: r2 stays out.
	w := 4
	if _, err := r.core.PatchServer(ctx, server.Actor{Name: "t", Via: "test"}, "web", "r1", server.ServerPatch{Weight: &w}, server.WriteOptions{NoWait: true}); err != nil {
		t.Fatal(err)
	}
	if got := r.weights(); !maps.Equal(got, map[string]uint32{"198.18.0.11": 4}) {
		t.Fatalf("after an edit the kernel has %v: a down server came back", got)
	}

	checks.set("198.18.0.11:80", "HTTP 503")
	r.waitWeights("the sorry server when none is up", map[string]uint32{"198.18.0.50": 1})
	checks.set("198.18.0.11:80", "")
	r.waitWeights("r1 back, the sorry server gone", map[string]uint32{"198.18.0.11": 4})
	r.stop()

	cur, err := st.CurrentHealth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2 := cur[refOf(t, "198.18.0.100:80", "198.18.0.12:80")]
	if r2.To != ipvsmgr.HealthDown || r2.Reason != "connection refused" {
		t.Errorf("r2's kept health = %+v, want down: connection refused", r2)
	}
	hist, err := st.HealthHistory(ctx, r2.Ref.Service, r2.Ref.Server, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].To != ipvsmgr.HealthDown || hist[1].To != ipvsmgr.HealthUp {
		t.Errorf("r2's history = %+v, want unknown->up then up->down", hist)
	}

	// A restart with checks that have not answered yet: the health kept
	// from the last run holds (r1 in, r2 out), nothing flaps.
	k.Ops()
	checks.hang = true
	r = startHealthDaemon(t, ctx, st, k, checks)
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if got := r.weights(); !maps.Equal(got, map[string]uint32{"198.18.0.11": 4}) {
			t.Fatalf("after a restart the kernel has %v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ops := k.Ops(); len(ops) != 0 {
		t.Errorf("a restart changed the kernel: %v", ops)
	}
	r.stop()
}

func refOf(t *testing.T, svc, srv string) ipvsmgr.ServerRef {
	t.Helper()
	var ref ipvsmgr.ServerRef
	if err := ref.Service.UnmarshalText([]byte("-t " + svc)); err != nil {
		t.Fatal(err)
	}
	if err := ref.Server.UnmarshalJSON([]byte(`"` + srv + `"`)); err != nil {
		t.Fatal(err)
	}
	return ref
}

// Without a daemon no checks run: a CLI's reconcile keeps checked servers in
// as configured, and only a forced health applies.
func TestReconcileWithoutDaemonKeepsCheckedServersIn(t *testing.T) {
	ctx := context.Background()
	st := testStore(t, ctx)
	k := fakekernel.New()
	core := server.New(server.Config{Store: st, OpenKernel: openFake(k, nil)})
	doc := strings.Replace(checkedDoc, `"weight": 2}`, `"weight": 2, "health": "down"}`, 1)
	if _, err := core.Apply(ctx, server.Actor{Name: "t", Via: "test"}, strings.NewReader(doc), "test", server.WriteOptions{NoWait: true}); err != nil {
		t.Fatal(err)
	}
	r := &healthRig{t: t, ctx: ctx, k: k}
	if got := r.weights(); !maps.Equal(got, map[string]uint32{"198.18.0.11": 3}) {
		t.Errorf("kernel has %v, want r1 as configured and the forced-down r2 out", got)
	}
	d, err := core.Diff(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Changes) != 0 {
		t.Errorf("diff without a daemon = %v, want nothing", d.Changes)
	}
}
