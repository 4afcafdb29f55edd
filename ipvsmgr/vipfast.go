package ipvsmgr

import (
	"context"
	"slices"
)

// AddVIPs brings vips up now, outside a reconcile: a director that has just
// become VRRP master must answer for its VIPs before anything else. Each one
// not yet on its interface is recorded in the ledger first, so that a crash
// right after cannot leave an address nobody knows ipvsctl added.
func (r *Reconciler) AddVIPs(ctx context.Context, vips []VIP) []Failure {
	if r.Addrs == nil || len(vips) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	led, err := r.Ledger.LoadLedger(ctx)
	if err != nil {
		return []Failure{{Service: "ledger", Change: "load ledger", Err: err.Error()}}
	}
	var fails []Failure
	var todo []VIP
	grown := false
	for _, v := range vips {
		has, err := r.Addrs.HasVIP(ctx, v)
		if err != nil {
			fails = append(fails, Failure{Service: v.String(), Change: "add VIP " + v.String(), Err: err.Error()})
			continue
		}
		if has {
			continue
		}
		todo = append(todo, v)
		if !slices.Contains(led.VIPs, v) {
			led.VIPs = append(led.VIPs, v)
			grown = true
		}
	}
	if grown {
		if err := r.Ledger.SaveLedger(ctx, led); err != nil {
			return append(fails, Failure{Service: "ledger", Change: "save ledger", Err: err.Error()})
		}
	}
	for _, v := range todo {
		if _, err := r.Addrs.EnsureVIP(ctx, v); err != nil {
			fails = append(fails, Failure{Service: v.String(), Change: "add VIP " + v.String(), Err: err.Error()})
			continue
		}
		r.Log.Info("VIP added", "vip", v.String())
	}
	return fails
}

// RemoveVIPs takes down now those of vips that ipvsctl added (the ledger
// says so), outside a reconcile: a director that stops being master lets its
// VIPs go at once. An address someone else put there stays.
func (r *Reconciler) RemoveVIPs(ctx context.Context, vips []VIP) []Failure {
	if r.Addrs == nil || len(vips) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	led, err := r.Ledger.LoadLedger(ctx)
	if err != nil {
		return []Failure{{Service: "ledger", Change: "load ledger", Err: err.Error()}}
	}
	var fails []Failure
	kept := led.VIPs[:0:0]
	for _, v := range led.VIPs {
		if !slices.Contains(vips, v) {
			kept = append(kept, v)
			continue
		}
		if err := r.Addrs.RemoveVIP(ctx, v); err != nil {
			fails = append(fails, Failure{Service: v.String(), Change: "remove VIP " + v.String(), Err: err.Error()})
			kept = append(kept, v)
			continue
		}
		r.Log.Info("VIP removed", "vip", v.String())
	}
	if len(kept) != len(led.VIPs) {
		led.VIPs = kept
		if err := r.Ledger.SaveLedger(ctx, led); err != nil {
			fails = append(fails, Failure{Service: "ledger", Change: "save ledger", Err: err.Error()})
		}
	}
	return fails
}
