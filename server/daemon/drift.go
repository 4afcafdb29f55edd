package daemon

import "github.com/ipvsctl/ipvsctl/ipvsmgr"

// drift is what another process changed in the kernel's IPVS table since
// the last reconcile: the changes that turn the table read last (the
// snapshot) back into the one that reconcile left. Nothing before the first
// reconcile, or when the snapshot is not newer than the last (it is then
// that reconcile's own table).
//
// A periodic reconcile counts only these as a repair: its other changes are
// ones the daemon owes itself, such as a health change whose own reconcile
// has not run yet (every server quiesced at once under load: the periodic
// reconcile can come first, and used to call that a repair).
func (sk *sharedKernel) drift() []ipvsmgr.Op {
	left, snap := sk.left.Load(), sk.snap.Load()
	if left == nil || snap == nil || left.Table == nil || snap.Table == nil || snap.Err != nil || !snap.At.After(left.At) {
		return nil
	}
	var opt ipvsmgr.DiffOptions
	sk.mu.Lock()
	keep := sk.desired != nil && sk.desired.Settings.KeepForeignServices
	sk.mu.Unlock()
	if keep { // another's service added since is not ipvsctl's to repair
		had := make(map[ipvsmgr.ServiceKey]bool, len(left.Table.Services))
		for _, s := range left.Table.Services {
			had[s.Key] = true
		}
		opt.Keep = func(k ipvsmgr.ServiceKey) bool { return !had[k] }
	}
	return ipvsmgr.Diff(left.Table, snap.Table, opt)
}

// repairs is how many changes of a periodic reconcile's result repaired
// what another process changed: the IPVS table's drift, and any host change
// (a VIP, module, sysctl or mangle rule put back: nothing but a drift of the
// host makes a periodic reconcile change one).
func repairs(drift []ipvsmgr.Op, res *ipvsmgr.Result) int {
	host := max(0, len(res.Changes)-len(res.Applied))
	if len(res.Changes) == 0 {
		return 0
	}
	return min(len(drift), len(res.Applied)) + host
}
