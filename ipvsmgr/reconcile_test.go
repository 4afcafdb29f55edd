package ipvsmgr_test

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

func mustCompile(t *testing.T, doc string) *ipvsmgr.Desired {
	t.Helper()
	st, err := ipvsmgr.DecodeState(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ipvsmgr.Compile(st)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type rig struct {
	k    *fakekernel.Kernel
	host *fakekernel.Host
	r    *ipvsmgr.Reconciler
	now  time.Time
}

func newRig(t *testing.T) *rig {
	g := &rig{k: fakekernel.New(), host: fakekernel.NewHost(), now: time.Unix(1_800_000_000, 0)}
	g.r = &ipvsmgr.Reconciler{
		Kernel: g.k, Host: g.host,
		Ledger: &fakekernel.Ledger{},
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:    func() time.Time { return g.now },
	}
	return g
}

func (g *rig) up(v ipvsmgr.VIP) bool {
	ok, _ := g.host.HasVIP(context.Background(), v)
	return ok
}

func (g *rig) reconcile(t *testing.T, doc string) (*ipvsmgr.Result, []string) {
	t.Helper()
	res, err := g.r.Reconcile(context.Background(), mustCompile(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	return res, g.k.Ops()
}

const twoServers = `{"services":[{"name":"web","address":"198.18.0.100","port":80,"interface":"eth0","scheduler":"wlc",
 "servers":[{"address":"198.18.0.11","weight":1},{"address":"198.18.0.12","weight":3}]}]}`

func TestReconcileFromEmptyThenNoop(t *testing.T) {
	g := newRig(t)
	res, ops := g.reconcile(t, twoServers)
	want := []string{
		"ipvsadm -A -t 198.18.0.100:80 -s wlc",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 3",
	}
	if diff := cmp.Diff(want, ops); diff != "" {
		t.Fatalf("ops (-want +got):\n%s", diff)
	}
	if len(res.Failures) != 0 || !g.up(ipvsmgr.VIP{Interface: "eth0", Addr: mustAddr("198.18.0.100")}) {
		t.Fatalf("failures %v", res.Failures)
	}
	if _, ops := g.reconcile(t, twoServers); len(ops) != 0 {
		t.Fatalf("second reconcile changed the kernel: %v", ops)
	}
}

func TestEditsAreInPlace(t *testing.T) {
	g := newRig(t)
	g.reconcile(t, twoServers)
	edited := strings.NewReplacer(`"scheduler":"wlc"`, `"scheduler":"sh","scheduler_flags":["port"],"persistence":30`,
		`"weight":3}`, `"weight":5,"upper_threshold":100,"forwarding":"tun"}`).Replace(twoServers)
	_, ops := g.reconcile(t, edited)
	want := []string{
		"ipvsadm -E -t 198.18.0.100:80 -s sh -b sh-port -p 30",
		"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.12:80 -i -w 5 -x 100",
	}
	if diff := cmp.Diff(want, ops); diff != "" {
		t.Fatalf("ops (-want +got):\n%s", diff)
	}
}

func TestRemovedServerDrains(t *testing.T) {
	g := newRig(t)
	g.reconcile(t, twoServers)
	svc := ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv4, Protocol: ipvsmgr.ProtoTCP, Addr: mustAddr("198.18.0.100"), Port: 80}
	r2 := ipvsmgr.DestKey{Addr: mustAddr("198.18.0.12"), Port: 80}
	g.k.SetActive(svc, r2, 4)
	oneServer := strings.Replace(twoServers, `,{"address":"198.18.0.12","weight":3}`, "", 1)

	res, ops := g.reconcile(t, oneServer)
	if diff := cmp.Diff([]string{"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 0"}, ops); diff != "" {
		t.Fatalf("busy server not drained (-want +got):\n%s", diff)
	}
	if len(res.Retiring) != 1 || res.Retiring[0].ActiveConns != 4 {
		t.Fatalf("draining = %+v", res.Retiring)
	}
	g.now = g.now.Add(10 * time.Second)
	if _, ops := g.reconcile(t, oneServer); len(ops) != 0 {
		t.Fatalf("still busy, yet changed: %v", ops)
	}
	g.k.SetActive(svc, r2, 0)
	res, ops = g.reconcile(t, oneServer)
	if diff := cmp.Diff([]string{"ipvsadm -d -t 198.18.0.100:80 -r 198.18.0.12:80"}, ops); diff != "" || len(res.Retiring) != 0 {
		t.Fatalf("idle drained server not deleted (-want +got):\n%s draining=%v", diff, res.Retiring)
	}
}

func TestDrainTimeoutDeletes(t *testing.T) {
	g := newRig(t)
	doc := strings.Replace(twoServers, `"services"`, `"settings":{"retire_timeout":30},"services"`, 1)
	g.reconcile(t, doc)
	svc := ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv4, Protocol: ipvsmgr.ProtoTCP, Addr: mustAddr("198.18.0.100"), Port: 80}
	g.k.SetActive(svc, ipvsmgr.DestKey{Addr: mustAddr("198.18.0.11"), Port: 80}, 2)
	oneServer := strings.Replace(doc, `{"address":"198.18.0.11","weight":1},`, "", 1)
	g.reconcile(t, oneServer)
	g.now = g.now.Add(31 * time.Second)
	_, ops := g.reconcile(t, oneServer)
	if diff := cmp.Diff([]string{"ipvsadm -d -t 198.18.0.100:80 -r 198.18.0.11:80"}, ops); diff != "" {
		t.Fatalf("drain timeout not honoured (-want +got):\n%s", diff)
	}
}

func TestOutOfBandChangeRepaired(t *testing.T) {
	g := newRig(t)
	g.reconcile(t, twoServers)
	// Someone runs ipvsadm -D, then ipvsadm -A of a stray service.
	tbl, _ := g.k.Table(context.Background())
	stray := &ipvsmgr.VirtualService{Key: ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv4, Protocol: ipvsmgr.ProtoUDP, Addr: mustAddr("198.18.0.9"), Port: 53}, Scheduler: "rr"}
	g.k.Apply(context.Background(), []ipvsmgr.Op{{Kind: ipvsmgr.OpDelService, Service: tbl.Services[0]}, {Kind: ipvsmgr.OpAddService, Service: stray}})
	g.k.Ops()
	_, ops := g.reconcile(t, twoServers)
	want := []string{
		"ipvsadm -D -u 198.18.0.9:53",
		"ipvsadm -A -t 198.18.0.100:80 -s wlc",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 1",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 3",
	}
	if diff := cmp.Diff(want, ops); diff != "" {
		t.Fatalf("repair (-want +got):\n%s", diff)
	}
}

func TestKeepForeignServices(t *testing.T) {
	g := newRig(t)
	foreign := &ipvsmgr.VirtualService{Key: ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv4, Protocol: ipvsmgr.ProtoTCP, Addr: mustAddr("198.18.5.1"), Port: 443}, Scheduler: "rr"}
	g.k.Apply(context.Background(), []ipvsmgr.Op{{Kind: ipvsmgr.OpAddService, Service: foreign}})
	g.k.Ops()
	shared := strings.Replace(twoServers, `"services"`, `"settings":{"keep_foreign_services":true},"services"`, 1)
	g.reconcile(t, shared)
	// Our service goes away: it is deleted, the foreign one stays.
	_, ops := g.reconcile(t, `{"settings":{"keep_foreign_services":true},"services":[]}`)
	if diff := cmp.Diff([]string{"ipvsadm -D -t 198.18.0.100:80"}, ops); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	tbl, _ := g.k.Table(context.Background())
	if len(tbl.Services) != 1 || tbl.Services[0].Key != foreign.Key {
		t.Fatalf("foreign service not kept: %+v", tbl.Services)
	}
	if g.up(ipvsmgr.VIP{Interface: "eth0", Addr: mustAddr("198.18.0.100")}) {
		t.Fatalf("VIP of the removed service still up")
	}
	// Owning the whole table (the default) removes it.
	if _, ops := g.reconcile(t, `{"services":[]}`); !cmp.Equal(ops, []string{"ipvsadm -D -t 198.18.5.1:443"}) {
		t.Fatalf("foreign service not removed in owner mode: %v", ops)
	}
}

func TestOneFailingServiceDoesNotStopOthers(t *testing.T) {
	g := newRig(t)
	g.k.FailOn = func(op ipvsmgr.Op) error {
		if op.Kind == ipvsmgr.OpAddService && op.Service.Key.Port == 81 {
			return syscall.ENOENT
		}
		return nil
	}
	doc := `{"services":[{"name":"a","address":"198.18.0.100","port":81,"scheduler":"mh","servers":[{"address":"198.18.0.11"}]},
	{"name":"b","address":"198.18.0.100","port":82,"servers":[{"address":"198.18.0.11"}]}]}`
	res, ops := g.reconcile(t, doc)
	if len(ops) != 2 || !strings.Contains(ops[0], ":82") {
		t.Fatalf("service b not applied: %v", ops)
	}
	if len(res.Failures) != 2 || res.Failures[0].Service != "a" || !strings.Contains(res.Failures[0].Err, "no such file") {
		t.Fatalf("failures = %+v", res.Failures)
	}
}

func TestVIPOwnership(t *testing.T) {
	g := newRig(t)
	// The operator's own address on the interface is never removed.
	pre := ipvsmgr.VIP{Interface: "eth0", Addr: mustAddr("198.18.0.100")}
	g.host.AddVIP(pre)
	g.reconcile(t, twoServers)
	g.reconcile(t, `{"services":[]}`)
	if !g.up(pre) {
		t.Fatal("removed an address ipvsctl did not add")
	}
	g.host.RemoveVIP(context.Background(), pre)
	g.reconcile(t, twoServers)
	g.reconcile(t, `{"services":[]}`)
	if g.up(pre) {
		t.Fatal("VIP ipvsctl added was not removed with its last service")
	}
}

// TestTransitionsInRandomOrder replays several states in random orders: every
// transition must converge (a second reconcile changes nothing) and leave the
// kernel equal to the state, whatever came before it.
func TestTransitionsInRandomOrder(t *testing.T) {
	states := []string{
		`{"services":[]}`,
		twoServers,
		strings.Replace(twoServers, `"weight":3`, `"weight":0`, 1),
		`{"settings":{"network":"nat","tcp_timeout":900},"services":[{"address":"198.18.0.100","port":80,"scheduler":"rr","servers":[{"address":"198.18.0.11","port":8080}]},
		  {"protocol":"udp","address":"2001:db8::1","port":53,"scheduler":"sh","scheduler_flags":["fallback"],"servers":[{"address":"2001:db8::11"}]}]}`,
		`{"services":[{"fwmark":9,"address":"198.18.0.100","scheduler":"wrr","persistence":120,"persistence_netmask":"255.255.0.0","servers":[{"address":"198.18.0.13","weight":7}]}]}`,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		g := newRig(t)
		for _, i := range rng.Perm(len(states)) {
			g.reconcile(t, states[i])
			if _, ops := g.reconcile(t, states[i]); len(ops) != 0 {
				t.Fatalf("round %d state %d did not converge: %v", round, i, ops)
			}
			tbl, _ := g.k.Table(context.Background())
			want := mustCompile(t, states[i]).Table
			if ops := ipvsmgr.Diff(want, tbl, ipvsmgr.DiffOptions{}); len(ops) != 0 || len(tbl.Services) != len(want.Services) {
				t.Fatalf("round %d state %d: kernel differs from the state: %v", round, i, ops)
			}
		}
	}
}

// A service with many real servers (looked up through a map, not scanned):
// only what differs changes.
func TestManyServersDiff(t *testing.T) {
	doc := func(skip, heavy int) string {
		var b strings.Builder
		b.WriteString(`{"services":[{"address":"198.18.0.100","port":80,"forwarding":"nat","servers":[`)
		first := true
		for j := range 40 {
			if j == skip {
				continue
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			w := 1
			if j == heavy {
				w = 7
			}
			b.WriteString(`{"address":"198.18.1.` + strconv.Itoa(1+j) + `","weight":` + strconv.Itoa(w) + `}`)
		}
		b.WriteString(`]}]}`)
		return b.String()
	}
	g := newRig(t)
	g.reconcile(t, doc(39, -1))
	_, ops := g.reconcile(t, doc(3, 20))
	want := []string{
		"ipvsadm -d -t 198.18.0.100:80 -r 198.18.1.4:80",
		"ipvsadm -e -t 198.18.0.100:80 -r 198.18.1.21:80 -m -w 7",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.1.40:80 -m -w 1",
	}
	if d := cmp.Diff(want, ops); d != "" {
		t.Fatalf("ops (-want +got):\n%s", d)
	}
}

// countingKernel counts the reads of the whole table.
type countingKernel struct {
	*fakekernel.Kernel
	reads int
}

func (k *countingKernel) Table(ctx context.Context) (*ipvsmgr.Table, error) {
	k.reads++
	return k.Kernel.Table(ctx)
}

// ReconcileOn makes a change against the table the caller knows, without
// reading the kernel; it reads it before deleting anything, and when the
// known table was wrong (someone ran ipvsadm) it reads it and still gets
// the kernel right.
func TestReconcileOnKnownTable(t *testing.T) {
	g := newRig(t)
	k := &countingKernel{Kernel: g.k}
	g.r.Kernel = k
	ctx := context.Background()
	res, err := g.r.Reconcile(ctx, mustCompile(t, twoServers))
	if err != nil || k.reads != 1 {
		t.Fatalf("first reconcile: %v, %d reads", err, k.reads)
	}
	g.k.Ops()
	known := res.Table
	reweighted := strings.Replace(twoServers, `"weight":3`, `"weight":5`, 1)
	res, err = g.r.ReconcileOn(ctx, mustCompile(t, reweighted), known, nil)
	if err != nil || k.reads != 1 || len(res.Failures) != 0 {
		t.Fatalf("weight change: %v, %d reads, failures %v", err, k.reads, res.Failures)
	}
	if diff := cmp.Diff([]string{"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.12:80 -g -w 5"}, g.k.Ops()); diff != "" {
		t.Fatalf("ops (-want +got):\n%s", diff)
	}
	// The table it gives back is the kernel's, and the one it was given is untouched.
	// The kernel lists the later added .12 first (at the head).
	if w := res.Table.Services[0].Dests[0].Weight; w != 5 {
		t.Errorf("table after: weight %d, want 5", w)
	}
	if w := known.Services[0].Dests[0].Weight; w != 3 {
		t.Errorf("the known table was changed: weight %d", w)
	}
	known = res.Table
	// A deletion reads the kernel first: its connection counts decide a drain.
	oneServer := strings.Replace(reweighted, `,{"address":"198.18.0.12","weight":5}`, ``, 1)
	if res, err = g.r.ReconcileOn(ctx, mustCompile(t, oneServer), known, nil); err != nil || k.reads != 2 {
		t.Fatalf("deletion: %v, %d reads", err, k.reads)
	}
	if diff := cmp.Diff([]string{"ipvsadm -d -t 198.18.0.100:80 -r 198.18.0.12:80"}, g.k.Ops()); diff != "" {
		t.Fatalf("ops (-want +got):\n%s", diff)
	}
	known = res.Table
	// Someone deletes the service behind our back: the known table is wrong,
	// the change fails against it, and a fresh read puts everything right.
	tbl, _ := g.k.Table(ctx)
	g.k.Apply(ctx, []ipvsmgr.Op{{Kind: ipvsmgr.OpDelService, Service: tbl.Services[0]}})
	g.k.Ops()
	res, err = g.r.ReconcileOn(ctx, mustCompile(t, strings.Replace(oneServer, `"weight":1`, `"weight":2`, 1)), known, nil)
	if err != nil || len(res.Failures) != 0 || k.reads != 3 {
		t.Fatalf("stale table: %v, failures %v, %d reads", err, res.Failures, k.reads)
	}
	if diff := cmp.Diff([]string{"ipvsadm -A -t 198.18.0.100:80 -s wlc", "ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 2"}, g.k.Ops()); diff != "" {
		t.Fatalf("repair ops (-want +got):\n%s", diff)
	}
}

// With only, ReconcileOn plans the services a write changed and leaves the
// rest alone (the periodic reconcile repairs them), and the ledger keeps
// what it had of the others.
func TestReconcileOnOnlyTheChangedService(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	two := `{"services":[{"name":"web","address":"198.18.0.100","port":80,"servers":[{"address":"198.18.0.11","weight":1}]},
	 {"name":"api","address":"198.18.0.101","port":80,"servers":[{"address":"198.18.0.21","weight":1}]}]}`
	res, err := g.r.Reconcile(ctx, mustCompile(t, two))
	if err != nil {
		t.Fatal(err)
	}
	g.k.Ops()
	led, _ := g.r.Ledger.LoadLedger(ctx)
	// Someone changes api's weight behind our back; then web's changes through a write.
	tbl, _ := g.k.Table(ctx)
	api := tbl.Services[1]
	d := *api.Dests[0]
	d.Weight = 9
	g.k.Apply(ctx, []ipvsmgr.Op{{Kind: ipvsmgr.OpEditDest, Service: api, Dest: &d}})
	g.k.Ops()
	changed := strings.Replace(two, `"198.18.0.11","weight":1`, `"198.18.0.11","weight":4`, 1)
	webKey := res.Table.Services[0].Key
	got, err := g.r.ReconcileOn(ctx, mustCompile(t, changed), res.Table, []ipvsmgr.ServiceKey{webKey})
	if err != nil || len(got.Failures) != 0 {
		t.Fatalf("%v %v", err, got.Failures)
	}
	if diff := cmp.Diff([]string{"ipvsadm -e -t 198.18.0.100:80 -r 198.18.0.11:80 -g -w 4"}, g.k.Ops()); diff != "" {
		t.Fatalf("ops (-want +got):\n%s", diff)
	}
	after, _ := g.r.Ledger.LoadLedger(ctx)
	if diff := cmp.Diff(led.Services, after.Services, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("owned services changed (-before +after):\n%s", diff)
	}
	// The full reconcile puts api right.
	if _, err := g.r.Reconcile(ctx, mustCompile(t, changed)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ipvsadm -e -t 198.18.0.101:80 -r 198.18.0.21:80 -g -w 1"}, g.k.Ops()); diff != "" {
		t.Fatalf("repair ops (-want +got):\n%s", diff)
	}
}

// A known table's connection counts are up to one poll old: a server it
// shows busy that is idle now leaves at once (a fresh read decides), and a
// server busy now still retires, whether the write names its service or not.
func TestReconcileOnDecidesRetiringOnFreshCounts(t *testing.T) {
	for _, only := range []bool{false, true} {
		g := newRig(t)
		k := &countingKernel{Kernel: g.k}
		g.r.Kernel = k
		ctx := context.Background()
		svc := ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv4, Protocol: ipvsmgr.ProtoTCP, Addr: mustAddr("198.18.0.100"), Port: 80}
		r2 := ipvsmgr.DestKey{Addr: mustAddr("198.18.0.12"), Port: 80}
		var keys []ipvsmgr.ServiceKey
		if only {
			keys = []ipvsmgr.ServiceKey{svc}
		}
		if _, err := g.r.Reconcile(ctx, mustCompile(t, twoServers)); err != nil {
			t.Fatal(err)
		}
		g.k.SetActive(svc, r2, 3)
		stale, _ := g.k.Table(ctx) // the poll saw .12 busy
		g.k.SetActive(svc, r2, 0)  // its last connection ended since
		g.k.Ops()
		reads := k.reads
		oneServer := strings.Replace(twoServers, `,{"address":"198.18.0.12","weight":3}`, "", 1)
		res, err := g.r.ReconcileOn(ctx, mustCompile(t, oneServer), stale, keys)
		if err != nil || len(res.Failures) != 0 {
			t.Fatalf("only=%v: %v %v", only, err, res.Failures)
		}
		if diff := cmp.Diff([]string{"ipvsadm -d -t 198.18.0.100:80 -r 198.18.0.12:80"}, g.k.Ops()); diff != "" || len(res.Retiring) != 0 {
			t.Fatalf("only=%v: an idle server retired on a stale count (-want +got):\n%s retiring %+v", only, diff, res.Retiring)
		}
		if k.reads != reads+1 {
			t.Fatalf("only=%v: %d fresh reads, want 1", only, k.reads-reads)
		}
	}
}
