package ipvsmgr

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// A VRRP takeover adds its VIPs before it writes anything (AddVIPs), so
// that its first advert and gratuitous ARPs wait on netlink only, never on
// the database. What keeps that crash-safe is the ledger's intent, written
// ahead of time by the reconciles: the VIPs this director may add as master,
// each recorded while absent from its interface. A process's first look at
// the ledger takes an intent VIP that is up as ipvsctl's (a takeover whose
// record a crash stopped), so the reconcile of a director that is not
// master removes it; after that look, an intent VIP that comes up without
// this process adding it is someone else's, and leaves the intent. An
// address ipvsctl did not add is never removed, but for one put on a backup
// by hand, under a VIP the pair carries, between a reconcile and a crash.

// ledger is the ledger as this reconciler knows it (the caller holds mu): the
// stored one, with the VIPs it owns whose record was lost and, until it has
// settled the intent, the intent's VIPs that are up. settle makes that
// first look count (a reconcile's, a takeover's); Plan only looks.
func (r *Reconciler) ledger(ctx context.Context, settle bool) (*Ledger, error) {
	stored, err := r.Ledger.LoadLedger(ctx)
	if err != nil {
		return nil, err
	}
	led := *stored
	led.VIPs = slices.Clone(stored.VIPs)
	if !r.settled && r.Host != nil {
		for _, v := range stored.Intent {
			if slices.Contains(led.VIPs, v) {
				continue
			}
			up, err := r.hasVIP(ctx, v)
			if err != nil {
				return nil, fmt.Errorf("VIP %s of the ledger's intent: %w", v, err)
			}
			if !up {
				continue
			}
			led.VIPs = append(led.VIPs, v)
			if settle {
				r.Log.Warn("VIP of the ledger's intent up at start: taken as added by ipvsctl before it stopped", "vip", v.String())
				r.owns(v, true)
			}
		}
		r.settled = r.settled || settle
	}
	for v := range r.own {
		if !slices.Contains(led.VIPs, v) {
			led.VIPs = append(led.VIPs, v)
		}
	}
	if settle && len(led.VIPs) != len(stored.VIPs) {
		r.unsaved = true
	}
	return &led, nil
}

// owns notes that this reconciler added v (or removed it).
func (r *Reconciler) owns(v VIP, added bool) {
	if r.own == nil {
		r.own = map[VIP]bool{}
	}
	if added {
		r.own[v] = true
	} else {
		delete(r.own, v)
	}
}

// recordIntent keeps in the new ledger, with settings.redundancy, the VIPs
// a takeover may add before it writes: of the VIPs this director carries as
// master (d.VIPs and d.Standby), those that are its own or absent from their
// interface now (host: as the reconcile left it). Only the VIPs in check are
// looked at (nil: all); the others keep their place in the old intent.
func (r *Reconciler) recordIntent(d *Desired, check []VIP, led, newLed *Ledger, host *HostState) {
	if d.Settings.Redundancy == nil || host == nil {
		return
	}
	all := append(slices.Clone(d.VIPs), d.Standby...)
	slices.SortFunc(all, compareVIPs)
	all = slices.Compact(all)
	for _, v := range all {
		if check != nil && !slices.Contains(check, v) {
			if slices.Contains(led.Intent, v) {
				newLed.Intent = append(newLed.Intent, v)
			}
			continue
		}
		if slices.Contains(newLed.VIPs, v) {
			newLed.Intent = append(newLed.Intent, v)
			continue
		}
		_, unknown := host.VIPErr[v]
		switch {
		case unknown:
			if slices.Contains(led.Intent, v) {
				newLed.Intent = append(newLed.Intent, v) // unknown: as it was
			}
		case !host.Up[v]:
			newLed.Intent = append(newLed.Intent, v)
		case slices.Contains(led.Intent, v):
			r.Log.Info("VIP up without ipvsctl: someone else's, out of the ledger's intent", "vip", v.String())
		}
	}
}

func compareVIPs(a, b VIP) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	return strings.Compare(a.Interface, b.Interface)
}
