package ipvsmgr

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The host half of a reconcile is decide-then-act, like the IPVS half: the
// reconciler observes the host (Host.Observe), a pure function (PlanHost)
// turns desired state, what was observed and the ledger into HostOps, and
// Host.Apply makes exactly those. What the director changes besides the IPVS
// table is: the kernel modules a state needs (ip_vs and its schedulers), the
// sysctls (forwarding for NAT), the VIPs on interfaces and the fwmark
// services' mangle rules.

// Host is the director's host as the reconcile sees it.
type Host interface {
	// Observe reads what q asks about. An error is returned only when
	// nothing could be read; one VIP that could not be looked up is in
	// HostState.VIPErr.
	Observe(ctx context.Context, q HostQuery) (*HostState, error)
	// Apply makes each op in order, carrying on past failures: one error
	// (nil: made) per op.
	Apply(ctx context.Context, ops []HostOp) []error
}

// HostQuery says what to observe.
type HostQuery struct {
	VIPs    []VIP
	Marks   bool // list ipvsctl's mangle rules
	Sysctls []string
	Modules []string
}

// HostState is what the host has.
type HostState struct {
	Up     map[VIP]bool
	VIPErr map[VIP]string // why a VIP could not be looked up
	// Marks are the ids of the rules in ipvsctl's mangle chains (MarkRule.ID),
	// in chain order, duplicates kept; MarkChain says which family has the
	// chain (index 0: IPv4, 1: IPv6).
	Marks     []string
	MarkChain [2]bool
	MarkErr   string // the chains could not be listed
	Sysctls   map[string]string
	Modules   map[string]bool // loaded
}

// HostOpKind is what a HostOp does.
type HostOpKind uint8

const (
	HostLoadModule HostOpKind = iota
	HostSetSysctl
	HostAddVIP
	HostDelVIP
	HostAddMark      // append Mark (creating the chain and PREROUTING's jump to it)
	HostDelMark      // delete the rules with MarkID (all of them, or all but the first with Dup)
	HostDelMarkChain // delete the (empty) chain of family V6 and PREROUTING's jump to it
)

// HostOp is one change to the host.
type HostOp struct {
	Kind   HostOpKind
	Module string
	Sysctl string
	Value  string
	VIP    VIP
	Mark   MarkRule
	MarkID string
	Dup    bool
	V6     bool
}

// MarkChain is the mangle chain ipvsctl owns; PREROUTING jumps to it.
const MarkChain = "IPVSCTL-FWMARK"

// ID is the rule's identity, carried in its comment: how a listed rule is
// recognised without parsing iptables' canonical form.
func (r MarkRule) ID() string {
	return fmt.Sprintf("ipvsctl:%d:%s:%s:%s", r.Mark, r.Protocol, joinPorts(r.Ports), r.Addr)
}

// Spec is the rule as iptables arguments.
func (r MarkRule) Spec() []string {
	bits := "/32"
	if r.Addr.Is6() {
		bits = "/128"
	}
	return []string{"-d", r.Addr.String() + bits, "-p", r.Protocol, "-m", "multiport", "--dports", joinPorts(r.Ports),
		"-m", "comment", "--comment", r.ID(), "-j", "MARK", "--set-mark", strconv.FormatUint(uint64(r.Mark), 10)}
}

func joinPorts(ports []int) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

func iptablesCmd(v6 bool) string {
	if v6 {
		return "ip6tables"
	}
	return "iptables"
}

// markIDv6 says whether a rule id (MarkRule.ID) is of an IPv6 rule.
func markIDv6(id string) bool { return strings.Count(id, ":") > 4 }

// String is the command that makes the change.
func (op HostOp) String() string {
	switch op.Kind {
	case HostLoadModule:
		return "modprobe " + op.Module
	case HostSetSysctl:
		return "sysctl " + op.Sysctl + "=" + op.Value
	case HostAddVIP:
		return "ip addr add " + op.VIP.Addr.String() + " dev " + op.VIP.Interface
	case HostDelVIP:
		return "ip addr del " + op.VIP.Addr.String() + " dev " + op.VIP.Interface
	case HostAddMark:
		return iptablesCmd(op.Mark.Addr.Is6()) + " -t mangle -A " + MarkChain + " " + strings.Join(op.Mark.Spec(), " ")
	case HostDelMark:
		what := "rule "
		if op.Dup {
			what = "duplicates of rule "
		}
		return iptablesCmd(markIDv6(op.MarkID)) + " -t mangle -D " + MarkChain + " (" + what + op.MarkID + ")"
	case HostDelMarkChain:
		return iptablesCmd(op.V6) + " -t mangle -X " + MarkChain
	}
	return "host op " + strconv.Itoa(int(op.Kind))
}

// failure names what a failed op was about, as a reconcile's result lists it.
func (op HostOp) failure(err error) Failure {
	f := Failure{Change: op.String(), Err: err.Error()}
	switch op.Kind {
	case HostLoadModule, HostSetSysctl:
		f.Service = "kernel"
	case HostAddVIP, HostDelVIP:
		f.Service = op.VIP.String()
		f.Change = map[HostOpKind]string{HostAddVIP: "add VIP ", HostDelVIP: "remove VIP "}[op.Kind] + op.VIP.String()
	default:
		f.Service = "fwmark rules"
	}
	return f
}

// beforeIPVS says whether op is made before the IPVS changes: what a new
// service needs (its modules, forwarding, its VIP) is there when it starts
// taking packets; what an old one leaves behind goes after it.
func (op HostOp) beforeIPVS() bool {
	return op.Kind == HostLoadModule || op.Kind == HostSetSysctl || op.Kind == HostAddVIP
}

// HostNeeds lists what d needs from the kernel besides the IPVS table: ip_vs
// and one ip_vs_SCHED module per scheduler used, and forwarding for NAT (a
// NAT director routes the real servers' replies back to the clients). The
// IPVS timeouts are set through netlink with the table.
func HostNeeds(d *Desired) (modules []string, sysctls map[string]string) {
	sysctls = map[string]string{}
	if len(d.Table.Services) == 0 {
		return nil, sysctls
	}
	seen := map[string]bool{}
	for _, s := range d.Table.Services {
		if s.Scheduler != "" && !seen[s.Scheduler] {
			seen[s.Scheduler] = true
			modules = append(modules, "ip_vs_"+s.Scheduler)
		}
		for _, dst := range s.Dests {
			if dst.Forward != ForwardNAT {
				continue
			}
			if s.Key.Family == FamilyIPv6 {
				sysctls["net.ipv6.conf.all.forwarding"] = "1"
			} else {
				sysctls["net.ipv4.ip_forward"] = "1"
			}
		}
	}
	if d.Settings.BGP != nil {
		bgpSysctls(d, sysctls)
	}
	slices.Sort(modules)
	return append([]string{"ip_vs"}, modules...), sysctls
}

// bgpSysctls are what a director of a BGP group needs: IPVS schedules a flow
// it has never seen on a packet that is not its first (another director's
// established flow, after ECMP moved it), and no director answers ARP for
// the VIPs it holds on the loopback.
func bgpSysctls(d *Desired, sysctls map[string]string) {
	sysctls["net.ipv4.vs.sloppy_tcp"] = "1"
	for _, s := range d.Table.Services {
		if s.Key.Protocol == ProtoSCTP {
			sysctls["net.ipv4.vs.sloppy_sctp"] = "1"
		}
	}
	sysctls["net.ipv4.conf.all.arp_ignore"] = "1"
	sysctls["net.ipv4.conf.all.arp_announce"] = "2"
}

// hostQuery is what a plan for d needs to see: d's VIPs, the ledger's, the
// ones the intent may take (check: those among d.VIPs and d.Standby; nil:
// all), the mangle rules when there are or were any, and d's needs.
func hostQuery(d *Desired, led *Ledger, marks bool) HostQuery {
	q := HostQuery{Marks: marks && (len(d.Marks) > 0 || led.Marks)}
	q.Modules, _ = HostNeeds(d)
	_, sys := HostNeeds(d)
	q.Sysctls = slices.Sorted(maps.Keys(sys))
	seen := map[VIP]bool{}
	for _, vs := range [][]VIP{d.VIPs, led.VIPs, d.Standby} {
		for _, v := range vs {
			if !seen[v] {
				seen[v] = true
				q.VIPs = append(q.VIPs, v)
			}
		}
	}
	return q
}

// HostPlanInput is what PlanHost decides on.
type HostPlanInput struct {
	Desired *Desired
	Seen    *HostState
	Ledger  *Ledger
	// Keep are VIPs owned that this plan must not take down although
	// Desired lacks them (a write's partial plan: they are other services').
	Keep []VIP
	// Marks: the plan covers the mangle rules.
	Marks bool
}

// PlanHost is the pure host half: what to load, set, add and remove so that
// the host has what the desired state needs. A VIP that was up before
// ipvsctl added it is not ipvsctl's (the ledger does not list it), so
// nothing removes it; a sysctl is only ever turned on.
func PlanHost(in HostPlanInput) []HostOp {
	d, seen, led := in.Desired, in.Seen, in.Ledger
	var ops []HostOp
	modules, sysctls := HostNeeds(d)
	for _, m := range modules {
		if !seen.Modules[m] {
			ops = append(ops, HostOp{Kind: HostLoadModule, Module: m})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(sysctls)) {
		if seen.Sysctls[k] != sysctls[k] {
			ops = append(ops, HostOp{Kind: HostSetSysctl, Sysctl: k, Value: sysctls[k]})
		}
	}
	for _, v := range d.VIPs {
		if !seen.Up[v] {
			ops = append(ops, HostOp{Kind: HostAddVIP, VIP: v})
		}
	}
	if in.Marks && (len(d.Marks) > 0 || led.Marks) {
		ops = append(ops, planMarks(d.Marks, seen)...)
	}
	for _, v := range led.VIPs {
		_, unknown := seen.VIPErr[v]
		if !slices.Contains(d.VIPs, v) && !slices.Contains(in.Keep, v) && (seen.Up[v] || unknown) {
			ops = append(ops, HostOp{Kind: HostDelVIP, VIP: v})
		}
	}
	return ops
}

// planMarks makes the chains hold exactly rules: missing rules are appended
// before stale ones are deleted, so no packet of a kept rule goes unmarked.
func planMarks(rules []MarkRule, seen *HostState) []HostOp {
	var ops []HostOp
	have := map[string]int{}
	for _, id := range seen.Marks {
		have[id]++
	}
	want := map[string]bool{}
	var wantFamily [2]bool
	for _, r := range rules {
		id := r.ID()
		if want[id] {
			continue
		}
		want[id] = true
		if r.Addr.Is6() {
			wantFamily[1] = true
		} else {
			wantFamily[0] = true
		}
		if have[id] == 0 {
			ops = append(ops, HostOp{Kind: HostAddMark, Mark: r})
		}
	}
	var stale, dups []string
	for id, n := range have {
		switch {
		case !want[id]:
			stale = append(stale, id)
		case n > 1:
			dups = append(dups, id)
		}
	}
	slices.Sort(stale)
	slices.Sort(dups)
	for _, id := range dups {
		ops = append(ops, HostOp{Kind: HostDelMark, MarkID: id, Dup: true})
	}
	for _, id := range stale {
		ops = append(ops, HostOp{Kind: HostDelMark, MarkID: id})
	}
	for fam, v6 := range []bool{false, true} {
		if seen.MarkChain[fam] && !wantFamily[fam] {
			ops = append(ops, HostOp{Kind: HostDelMarkChain, V6: v6})
		}
	}
	return ops
}

// after is the host once ops were made (errs[i] nil: op i was).
func (s *HostState) after(ops []HostOp, errs []error) *HostState {
	out := *s
	out.Up = maps.Clone(s.Up)
	if out.Up == nil {
		out.Up = map[VIP]bool{}
	}
	for i, op := range ops {
		if errs[i] != nil {
			continue
		}
		switch op.Kind {
		case HostAddVIP:
			out.Up[op.VIP] = true
		case HostDelVIP:
			out.Up[op.VIP] = false
		}
	}
	return &out
}

// observeHost observes what a plan for d needs, the failures of the VIP
// look-ups listed; nil without a host.
func (r *Reconciler) observeHost(ctx context.Context, q HostQuery) (*HostState, []Failure, error) {
	if r.Host == nil {
		return nil, nil, nil
	}
	seen, err := r.Host.Observe(ctx, q)
	if err != nil {
		return nil, nil, fmt.Errorf("observe host: %w", err)
	}
	// A VIP that could not be looked up is planned as absent (to add) or
	// present (to remove): its op's failure says why.
	var fails []Failure
	if seen.MarkErr != "" {
		fails = append(fails, Failure{Service: "fwmark rules", Change: "list mangle rules", Err: seen.MarkErr})
	}
	return seen, fails, nil
}

// applyHost makes ops on the host, listing each as made or failed in res.
func (r *Reconciler) applyHost(ctx context.Context, ops []HostOp, res *Result) []error {
	if len(ops) == 0 {
		return nil
	}
	errs := r.Host.Apply(ctx, ops)
	for i, op := range ops {
		if errs[i] != nil {
			f := op.failure(errs[i])
			res.Failures = append(res.Failures, f)
			r.Log.Error("host change failed", "change", f.Change, "err", errs[i])
			continue
		}
		res.Changes = append(res.Changes, op.String())
		r.Log.Info("host changed", "change", op.String())
		switch op.Kind {
		case HostAddVIP:
			r.owns(op.VIP, true)
		case HostDelVIP:
			r.owns(op.VIP, false)
		}
	}
	return errs
}

// hostLedger is the ledger's host part after ops were made: the VIPs
// ipvsctl answers for (d's that it added or had, the old ones it could not
// take down or keeps) and whether mangle rules may be installed.
func hostLedger(in HostPlanInput, ops []HostOp, errs []error, newLed *Ledger) {
	d, led := in.Desired, in.Ledger
	failed := map[VIP]bool{}
	added := map[VIP]bool{}
	marksFailed := false
	for i, op := range ops {
		switch {
		case op.Kind == HostAddVIP && errs[i] == nil:
			added[op.VIP] = true
		case (op.Kind == HostDelVIP) && errs[i] != nil:
			failed[op.VIP] = true
		case (op.Kind == HostAddMark || op.Kind == HostDelMark || op.Kind == HostDelMarkChain) && errs[i] != nil:
			marksFailed = true
		}
	}
	for _, v := range d.VIPs {
		if added[v] || slices.Contains(led.VIPs, v) {
			newLed.VIPs = append(newLed.VIPs, v)
		}
	}
	for _, v := range led.VIPs {
		if !slices.Contains(d.VIPs, v) && (failed[v] || slices.Contains(in.Keep, v)) {
			newLed.VIPs = append(newLed.VIPs, v)
		}
	}
	if in.Marks && (len(d.Marks) > 0 || led.Marks) {
		newLed.Marks = len(d.Marks) > 0 || marksFailed || in.Seen.MarkErr != ""
	} else {
		newLed.Marks = led.Marks
	}
}

// hasVIP looks up one VIP.
func (r *Reconciler) hasVIP(ctx context.Context, v VIP) (bool, error) {
	seen, err := r.Host.Observe(ctx, HostQuery{VIPs: []VIP{v}})
	if err != nil {
		return false, err
	}
	if e, ok := seen.VIPErr[v]; ok {
		return false, errors.New(e)
	}
	return seen.Up[v], nil
}

// addVIP brings v up unless it is; added says whether this call did (an
// address someone else put there is not ipvsctl's).
func (r *Reconciler) addVIP(ctx context.Context, v VIP) (added bool, err error) {
	if up, err := r.hasVIP(ctx, v); err != nil || up {
		return false, err
	}
	if err := r.Host.Apply(ctx, []HostOp{{Kind: HostAddVIP, VIP: v}})[0]; err != nil {
		return false, err
	}
	return true, nil
}

// removeVIP takes v down; one already gone is not an error.
func (r *Reconciler) removeVIP(ctx context.Context, v VIP) error {
	return r.Host.Apply(ctx, []HostOp{{Kind: HostDelVIP, VIP: v}})[0]
}
