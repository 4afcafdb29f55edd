package ipvsmgr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"time"
)

// Retiring is a removed (or disabled) real server kept at weight 0 until its
// connections end ("retiring": a drain is the admin state of a server kept).
type Retiring struct {
	Service     ServiceKey `json:"service"`
	Dest        DestKey    `json:"dest"`
	Since       time.Time  `json:"since"`
	ActiveConns uint32     `json:"active_conns"`
}

// Ledger is what ipvsctl remembers between reconciles about what it owns.
type Ledger struct {
	Services []ServiceKey `json:"services"`
	VIPs     []VIP        `json:"vips"`
	// Intent are the VIPs a VRRP takeover may add before it writes the
	// ledger (AddVIPs), recorded ahead of it while each was absent from its
	// interface: one of them found up by a process that has not yet
	// reconciled is taken to be ipvsctl's (a takeover whose record a crash
	// stopped), see Reconciler.ledger.
	Intent   []VIP      `json:"intent,omitempty"`
	Retiring []Retiring `json:"drains"` // the stored form's old name for the retiring servers
	Marks    bool       `json:"marks"`  // mangle rules were installed
}

// LedgerStore persists the ledger.
type LedgerStore interface {
	LoadLedger(ctx context.Context) (*Ledger, error)
	SaveLedger(ctx context.Context, l *Ledger) error
}

// Failure is one change that did not happen, with its reason.
type Failure struct {
	Service string `json:"service"`
	Change  string `json:"change"`
	Err     string `json:"error"`
	// Key and Dest say, typed, which virtual service (and real server) a
	// failed kernel change was for: readers need not parse Change.
	Key  *ServiceKey `json:"-"`
	Dest *DestKey    `json:"-"`
}

// Result is what one reconcile did.
type Result struct {
	Applied  []Op       `json:"-"`
	Changes  []string   `json:"changes"`
	Failures []Failure  `json:"failures"`
	Retiring []Retiring `json:"retiring"`
	// Table is the kernel's table after the reconcile: as read, with the
	// changes that were made (counters as read).
	Table *Table `json:"-"`

	retry bool // ReconcileOn must read the kernel and reconcile again
	// transport: an op's request or answer was lost (ErrTransport): what
	// the kernel has must be read again.
	transport bool
}

// transportRetries is how many times a reconcile reads the kernel again
// after the netlink socket lost requests or answers.
const transportRetries = 3

// Reconciler makes the kernel match a desired state.
type Reconciler struct {
	Kernel Kernel
	Host   Host // nil leaves the host alone: modules, sysctls, VIPs, mangle rules
	Ledger LedgerStore
	Log    *slog.Logger
	Now    func() time.Time

	mu sync.Mutex // one reconcile at a time; guards the fields below
	// own are the VIPs this reconciler added (or took as ipvsctl's when it
	// settled the intent) and has not removed: they are the ledger's even
	// when the save that would record them failed.
	own map[VIP]bool
	// settled: the intent's VIPs that were up were taken as ipvsctl's; from
	// then on, one that comes up without this reconciler is someone else's.
	settled bool
	unsaved bool // the ledger as loaded lacks some of own: save it
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Planned is what a reconcile would do.
type Planned struct {
	Ops      []Op     // IPVS changes
	Host     []string // module, sysctl, VIP and mangle-rule changes, as the commands that make them
	Retiring []Retiring
}

// Plan computes what Reconcile would change, changing nothing.
func (r *Reconciler) Plan(ctx context.Context, d *Desired) (*Planned, error) {
	actual, err := r.Kernel.Table(ctx)
	if err != nil {
		return nil, err
	}
	return r.PlanOn(ctx, d, actual)
}

// PlanOn is Plan against a table the caller knows the kernel has (the
// daemon's snapshot): it reads the host, never the kernel's IPVS table, and
// holds the reconciler only to read the ledger.
func (r *Reconciler) PlanOn(ctx context.Context, d *Desired, actual *Table) (*Planned, error) {
	p, err := r.PlanTable(ctx, d, actual)
	if err != nil {
		return nil, err
	}
	if p.Host, err = r.PlanHostChanges(ctx, d); err != nil {
		return nil, err
	}
	return p, nil
}

// PlanTable is the IPVS half of PlanOn: a function of d's table, health and
// settings, actual and the ledger, not of the VIPs (the role's part).
func (r *Reconciler) PlanTable(ctx context.Context, d *Desired, actual *Table) (*Planned, error) {
	r.mu.Lock()
	led, err := r.ledger(ctx, false)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	p := &Planned{}
	p.Ops, p.Retiring = plan(d, actual, led, r.now())
	return p, nil
}

// PlanHostChanges is the host half of PlanOn: the host read now.
func (r *Reconciler) PlanHostChanges(ctx context.Context, d *Desired) ([]string, error) {
	if r.Host == nil {
		return nil, nil
	}
	r.mu.Lock()
	led, err := r.ledger(ctx, false)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	seen, fails, err := r.observeHost(ctx, hostQuery(d, led, true))
	if err != nil {
		return nil, err
	}
	if len(fails) > 0 {
		return nil, fmt.Errorf("%s: %s", fails[0].Change, fails[0].Err)
	}
	var out []string
	for _, op := range PlanHost(HostPlanInput{Desired: d, Seen: seen, Ledger: led, Marks: true}) {
		out = append(out, op.String())
	}
	return out, nil
}

// plan is the pure core: desired (with the health the checks observed) +
// kernel + ledger + clock -> ops and drains.
func plan(d *Desired, actual *Table, led *Ledger, now time.Time) ([]Op, []Retiring) {
	timeout := time.Duration(d.Settings.RetireTimeout) * time.Second
	if timeout == 0 {
		timeout = DefaultRetireTimeout * time.Second
	}
	want, drains := withRetiring(d.Table, actual, led.Retiring, now, timeout)
	// After the drains: a server the checks take out goes at once (a dead
	// server's connections are not worth waiting for).
	want = ApplyHealthTo(want, d, d.Health, actual)
	opt := DiffOptions{Canonical: d.Settings.BGP != nil}
	if d.Settings.KeepForeignServices {
		owned := make(map[ServiceKey]bool, len(led.Services))
		for _, k := range led.Services {
			owned[k] = true
		}
		opt.Keep = func(k ServiceKey) bool { return !owned[k] }
	}
	return Diff(want, actual, opt), drains
}

// withRetiring returns desired with every removed-but-busy real server kept at
// weight 0, and the list of those drains. A removed server with no active
// connection, or whose drain began more than timeout ago, is left out (deleted).
func withRetiring(desired, actual *Table, prev []Retiring, now time.Time, timeout time.Duration) (*Table, []Retiring) {
	since := make(map[[2]string]time.Time, len(prev))
	for _, dr := range prev {
		since[[2]string{dr.Service.String(), dr.Dest.String()}] = dr.Since
	}
	have := make(map[ServiceKey]*VirtualService, len(actual.Services))
	for _, s := range actual.Services {
		have[s.Key] = s
	}
	out := &Table{Timeouts: desired.Timeouts, Services: make([]*VirtualService, 0, len(desired.Services))}
	var drains []Retiring
	for _, s := range desired.Services {
		cur := have[s.Key]
		if cur == nil {
			out.Services = append(out.Services, s)
			continue
		}
		var extra []*Destination
		var wanted func(DestKey) *Destination
		for _, d := range cur.Dests {
			if d.ActiveConns == 0 {
				continue
			}
			if wanted == nil {
				wanted = destFinder(s.Dests)
			}
			if wanted(d.Key) != nil {
				continue
			}
			start, ok := since[[2]string{s.Key.String(), d.Key.String()}]
			if !ok {
				start = now
			}
			if now.Sub(start) >= timeout {
				continue
			}
			kept := *d
			kept.Weight = 0
			extra = append(extra, &kept)
			drains = append(drains, Retiring{Service: s.Key, Dest: d.Key, Since: start, ActiveConns: d.ActiveConns})
		}
		if len(extra) == 0 {
			out.Services = append(out.Services, s)
			continue
		}
		cp := *s
		cp.Dests = append(slices.Clone(s.Dests), extra...)
		out.Services = append(out.Services, &cp)
	}
	return out, drains
}

// Reconcile makes the kernel match d. It returns an error only when it could
// not start (the kernel table or the ledger could not be read); each change
// that failed is listed in the result and the others still happen.
func (r *Reconciler) Reconcile(ctx context.Context, d *Desired) (*Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reconcileFresh(ctx, d, nil)
}

// reconcileFresh reconciles against a read of the kernel, and again (a few
// times) while the netlink socket loses requests or answers: the next read
// says which of them the kernel made, so none is sent twice. prev's
// changes, when given, come first in the result.
func (r *Reconciler) reconcileFresh(ctx context.Context, d *Desired, prev *Result) (*Result, error) {
	for attempt := 0; ; attempt++ {
		res, err := r.reconcile(ctx, d, nil)
		if err != nil {
			return nil, err
		}
		if prev != nil {
			res.Applied = append(prev.Applied, res.Applied...)
			res.Changes = append(prev.Changes, res.Changes...)
		}
		if !res.transport || attempt == transportRetries || ctx.Err() != nil {
			return res, nil
		}
		r.Log.Warn("netlink lost IPVS requests or answers; reading the kernel again", "attempt", attempt+1, "failed", len(res.Failures))
		res.Failures, res.transport = nil, false
		prev = res
	}
}

// ReconcileOn is Reconcile against a table the caller knows the kernel has
// (the daemon's: its last read, with the changes it made since), instead of
// reading the kernel's 11,000 entries for a change of one. When the changes
// would delete something (a drain decision needs fresh connection counts),
// or when one fails (the table was not the kernel's after all), it reads the
// kernel and reconciles again.
//
// only, when not nil, names the services a write changed: the others are
// neither planned nor touched (the periodic reconcile repairs them).
func (r *Reconciler) ReconcileOn(ctx context.Context, d *Desired, known *Table, only []ServiceKey) (*Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var res *Result
	var err error
	if only != nil {
		res, err = r.reconcileOnly(ctx, d, known, only)
	} else {
		res, err = r.reconcile(ctx, d, known)
	}
	if err != nil || !res.retry {
		return res, err
	}
	res.Failures = nil
	return r.reconcileFresh(ctx, d, res)
}

// reconcileOnly is reconcile against known for the services in only: a
// write's change of one service among a thousand plans that one.
func (r *Reconciler) reconcileOnly(ctx context.Context, d *Desired, known *Table, only []ServiceKey) (*Result, error) {
	in := make(map[ServiceKey]bool, len(only))
	fwmark := false
	addrs := map[netip.Addr]bool{}
	for _, k := range only {
		in[k] = true
		fwmark = fwmark || k.FWMark != 0
		addrs[k.Addr] = true
	}
	pd := *d
	pd.Table = &Table{Timeouts: d.Table.Timeouts}
	for _, s := range d.Table.Services {
		if in[s.Key] {
			pd.Table.Services = append(pd.Table.Services, s)
		}
	}
	pd.VIPs = nil
	for _, v := range d.VIPs {
		if fwmark || addrs[v.Addr] {
			pd.VIPs = append(pd.VIPs, v)
		}
	}
	if !fwmark {
		pd.Marks = nil
	}
	part := &Table{Timeouts: known.Timeouts}
	for _, s := range known.Services {
		if in[s.Key] {
			part.Services = append(part.Services, s)
		}
	}
	pd.Standby = nil
	for _, v := range d.Standby {
		if fwmark || addrs[v.Addr] {
			pd.Standby = append(pd.Standby, v)
		}
	}
	led, err := r.ledger(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("load ledger: %w", err)
	}
	ops, drains := plan(&pd, part, led, r.now())
	if removes(ops, drains, led) {
		return &Result{retry: true}, nil
	}
	res := &Result{Retiring: drains}
	newLed := &Ledger{Retiring: drains}
	for _, dr := range led.Retiring {
		if !in[dr.Service] {
			newLed.Retiring = append(newLed.Retiring, dr)
		}
	}
	var keep []VIP // owned, and not this write's
	for _, v := range d.VIPs {
		if !slices.Contains(pd.VIPs, v) {
			keep = append(keep, v)
		}
	}
	h := r.hostBefore(ctx, HostPlanInput{Desired: &pd, Ledger: led, Keep: keep, Marks: fwmark}, res)
	errs := r.apply(ctx, d, ops, res)
	if len(res.Failures) > 0 {
		res.retry, res.Failures = true, nil
	}
	res.Table = known.With(ops, errs)
	newLed.Services = ownedServices(d, res.Table, led)
	r.hostAfter(ctx, h, d, append(slices.Clone(pd.VIPs), pd.Standby...), led, res, newLed)
	r.saveLedger(ctx, led, newLed, res)
	return res, nil
}

// reconcile reconciles against known, or the kernel's table read now when
// known is nil. Against known, it stops before a deletion or after a
// failure, with retry set.
func (r *Reconciler) reconcile(ctx context.Context, d *Desired, known *Table) (*Result, error) {
	actual := known
	if actual == nil {
		var err error
		if actual, err = r.Kernel.Table(ctx); err != nil {
			return nil, fmt.Errorf("read kernel IPVS table: %w", err)
		}
	}
	led, err := r.ledger(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("load ledger: %w", err)
	}
	ops, drains := plan(d, actual, led, r.now())
	if known != nil && removes(ops, drains, led) {
		return &Result{retry: true}, nil
	}
	res := &Result{Retiring: drains}
	newLed := &Ledger{Retiring: drains}
	h := r.hostBefore(ctx, HostPlanInput{Desired: d, Ledger: led, Marks: true}, res)
	errs := r.apply(ctx, d, ops, res)
	if known != nil && len(res.Failures) > 0 {
		res.retry = true
		res.Failures = nil // the reconcile on a fresh read says what still fails
	}
	res.Table = actual.With(ops, errs) // what the kernel took, the table now has
	newLed.Services = ownedServices(d, res.Table, led)
	r.hostAfter(ctx, h, d, nil, led, res, newLed)
	r.saveLedger(ctx, led, newLed, res)
	return res, nil
}

// removes reports a plan that takes something out of the kernel: a
// deletion, or a real server that begins to retire. Whether a removed server
// is deleted or kept at weight 0 is decided by its active connections, so
// such a plan is made again on a fresh read of the kernel: a known table's
// counts are up to one poll old, and a server idle now but busy then would
// retire (and stay in the kernel) instead of leaving.
func removes(ops []Op, drains []Retiring, led *Ledger) bool {
	if slices.ContainsFunc(ops, func(op Op) bool { return op.Kind == OpDelService || op.Kind == OpDelDest }) {
		return true
	}
	return slices.ContainsFunc(drains, func(dr Retiring) bool {
		return !slices.ContainsFunc(led.Retiring, func(p Retiring) bool { return p.Service == dr.Service && p.Dest == dr.Dest })
	})
}

// hostStep is the host half of one reconcile: what was observed, the plan,
// and what became of each op.
type hostStep struct {
	in   HostPlanInput
	ops  []HostOp
	errs []error
}

// hostBefore observes the host, plans its half, and makes the ops that go
// before the IPVS changes (nil without a host, or when it could not be read).
func (r *Reconciler) hostBefore(ctx context.Context, in HostPlanInput, res *Result) *hostStep {
	seen, fails, err := r.observeHost(ctx, hostQuery(in.Desired, in.Ledger, in.Marks))
	res.Failures = append(res.Failures, fails...)
	if err != nil {
		res.Failures = append(res.Failures, Failure{Service: "host", Change: "observe host", Err: err.Error()})
		r.Log.Error("observe host failed", "err", err)
	}
	if seen == nil {
		return nil
	}
	in.Seen = seen
	h := &hostStep{in: in, ops: PlanHost(in)}
	h.errs = make([]error, len(h.ops))
	var first []int
	for i, op := range h.ops {
		if op.beforeIPVS() {
			first = append(first, i)
		}
	}
	r.applyHostAt(ctx, h, first, res)
	return h
}

// hostAfter makes the host ops that go after the IPVS changes and writes
// the host part of the new ledger; the intent looks at check (nil: all).
func (r *Reconciler) hostAfter(ctx context.Context, h *hostStep, d *Desired, check []VIP, led *Ledger, res *Result, newLed *Ledger) {
	if h == nil {
		newLed.VIPs, newLed.Marks, newLed.Intent = led.VIPs, led.Marks, led.Intent
		return
	}
	var rest []int
	for i, op := range h.ops {
		if !op.beforeIPVS() {
			rest = append(rest, i)
		}
	}
	r.applyHostAt(ctx, h, rest, res)
	hostLedger(h.in, h.ops, h.errs, newLed)
	r.recordIntent(d, check, h.in.Ledger, newLed, h.in.Seen.after(h.ops, h.errs))
}

func (r *Reconciler) applyHostAt(ctx context.Context, h *hostStep, at []int, res *Result) {
	ops := make([]HostOp, len(at))
	for j, i := range at {
		ops[j] = h.ops[i]
	}
	for j, err := range r.applyHost(ctx, ops, res) {
		h.errs[at[j]] = err
	}
}

// apply makes ops in the kernel, listing each as made or failed in res.
func (r *Reconciler) apply(ctx context.Context, d *Desired, ops []Op, res *Result) []error {
	errs := r.Kernel.Apply(ctx, ops)
	logChanges := r.Log.Enabled(ctx, slog.LevelInfo)
	for i, op := range ops {
		name := "timeouts"
		if op.Service != nil {
			if name = d.Names[op.Service.Key]; name == "" {
				name = op.Service.Key.String()
			}
		}
		change := op.String()
		if errs[i] != nil {
			res.transport = res.transport || errors.Is(errs[i], ErrTransport)
			f := Failure{Service: name, Change: change, Err: errs[i].Error()}
			if op.Service != nil {
				f.Key = &op.Service.Key
			}
			if op.Dest != nil {
				f.Dest = &op.Dest.Key
			}
			res.Failures = append(res.Failures, f)
			r.Log.Error("kernel change failed", "service", name, "change", change, "err", errs[i])
			continue
		}
		res.Applied = append(res.Applied, op)
		res.Changes = append(res.Changes, change)
		if logChanges {
			r.Log.Info("kernel changed", "service", name, "change", change)
		}
	}
	return errs
}

// saveLedger stores the new ledger unless it is the one stored.
func (r *Reconciler) saveLedger(ctx context.Context, led, newLed *Ledger, res *Result) {
	if !r.unsaved && reflect.DeepEqual(led, newLed) {
		return
	}
	if err := r.Ledger.SaveLedger(ctx, newLed); err != nil {
		res.Failures = append(res.Failures, Failure{Service: "ledger", Change: "save ledger", Err: err.Error()})
		return
	}
	r.unsaved = false
}

// ownedServices is the set of kernel services ipvsctl answers for after a
// reconcile: the desired ones now in the kernel (after, the table with the
// reconcile's changes made) and the old ones it failed to delete.
func ownedServices(d *Desired, after *Table, led *Ledger) []ServiceKey {
	inKernel := map[ServiceKey]bool{}
	for _, s := range after.Services {
		inKernel[s.Key] = true
	}
	var out []ServiceKey
	seen := map[ServiceKey]bool{}
	for _, s := range d.Table.Services {
		if inKernel[s.Key] && !seen[s.Key] {
			out = append(out, s.Key)
			seen[s.Key] = true
		}
	}
	for _, k := range led.Services {
		if inKernel[k] && !seen[k] {
			out = append(out, k)
			seen[k] = true
		}
	}
	return out
}
