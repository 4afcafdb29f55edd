package ipvsmgr

import (
	"cmp"
	"slices"
)

// DiffOptions tunes Diff.
type DiffOptions struct {
	// Keep reports whether an actual service that is not desired must be left
	// alone (a foreign service when the table is shared). Nil deletes them all.
	Keep func(ServiceKey) bool
	// Canonical keeps every service's kernel destination list in canonical
	// order (BGP mode: mh builds its Maglev table walking that list, so
	// every director must hold the same order; see canonicalDests).
	Canonical bool
}

// Diff returns the ops that turn actual into desired, in an order the kernel
// accepts: service deletes, then per service its adds and edits with the
// destination changes after the service that holds them. Edits are in place:
// a changed weight, scheduler, flag, persistence, threshold or forwarding
// method never deletes and re-adds, so established connections survive.
func Diff(desired, actual *Table, opt DiffOptions) []Op {
	var ops []Op
	have := make(map[ServiceKey]*VirtualService, len(actual.Services))
	for _, s := range actual.Services {
		have[s.Key] = s
	}
	want := make(map[ServiceKey]bool, len(desired.Services))
	for _, s := range desired.Services {
		want[s.Key] = true
	}
	for _, s := range sortedServices(actual.Services) {
		if !want[s.Key] && (opt.Keep == nil || !opt.Keep(s.Key)) {
			ops = append(ops, Op{Kind: OpDelService, Service: s})
		}
	}
	for _, s := range desired.Services {
		cur, ok := have[s.Key]
		if !ok {
			ops = append(ops, Op{Kind: OpAddService, Service: s})
			ds := s.Dests
			if opt.Canonical {
				ds = slices.Clone(ds)
				canonicalOrder(ds)
			}
			for _, d := range ds {
				ops = append(ops, Op{Kind: OpAddDest, Service: s, Dest: d})
			}
			continue
		}
		if !sameServiceAttrs(s, cur) {
			ops = append(ops, Op{Kind: OpEditService, Service: s})
		}
		if opt.Canonical {
			ops = append(ops, canonicalDests(s, cur)...)
		} else {
			ops = append(ops, diffDests(s, cur)...)
		}
	}
	if t := desired.Timeouts; t != (Timeouts{}) {
		merged := actual.Timeouts
		if t.TCP != 0 {
			merged.TCP = t.TCP
		}
		if t.TCPFin != 0 {
			merged.TCPFin = t.TCPFin
		}
		if t.UDP != 0 {
			merged.UDP = t.UDP
		}
		if merged != actual.Timeouts {
			ops = append(ops, Op{Kind: OpSetTimeouts, Timeouts: t})
		}
	}
	return ops
}

func diffDests(want, have *VirtualService) []Op {
	var ops []Op
	cur, wanted := destFinder(have.Dests), destFinder(want.Dests)
	for _, d := range have.Dests {
		if wanted(d.Key) == nil {
			ops = append(ops, Op{Kind: OpDelDest, Service: want, Dest: d})
		}
	}
	for _, d := range want.Dests {
		c := cur(d.Key)
		switch {
		case c == nil:
			ops = append(ops, Op{Kind: OpAddDest, Service: want, Dest: d})
		case !sameDestAttrs(d, c):
			ops = append(ops, Op{Kind: OpEditDest, Service: want, Dest: d})
		}
	}
	return ops
}

// canonicalDests is diffDests for a BGP-mode service: the ops that also
// leave have's destination list (the kernel's, head first) in canonical
// order, so that mh's Maglev table is the one every director builds.
//
// The kernel facts this rests on (net/netfilter/ipvs/ip_vs_ctl.c, checked
// in the Linux source): __ip_vs_update_dest links a new destination with
// list_add_rcu(&dest->n_list, &svc->destinations), at the head of the list,
// and ip_vs_mh_populate walks that list from the head; so a service whose
// servers were added in canonical order (ascending address, port) lists
// them descending, and one added later sits at the head on a running
// director but in its place on one started afterwards. No op moves a
// destination, so the planner deletes and re-adds the ones ahead of the
// longest tail of the list that already is in its canonical place:
// ip_vs_del_dest (__ip_vs_unlink_dest, __ip_vs_del_dest) clears
// IP_VS_DEST_F_AVAILABLE, unlinks the destination and moves it, with the
// references its connection entries hold, to ipvs->dest_trash (freed only
// by the trash timer once no connection refers to it); ip_vs_add_dest asks
// ip_vs_trash_get_dest first, which hands the same struct back (same
// address, port, family, protocol, fwmark or VIP and port), and
// __ip_vs_update_dest re-links it at the head with AVAILABLE set again and
// its counters kept. The connection entries point at that struct all along,
// so they keep their real server. In between, ip_vs_in_hook finds their
// destination not AVAILABLE: with net.ipv4.vs.expire_nodest_conn=0 it
// drops the packet and keeps the entry; with 1 it expires the entry and
// schedules the packet anew (and __ip_vs_del_dest queues the flush of such
// entries one jiffy later). So each re-added destination is deleted
// immediately before its add, in one batch of one reconcile: the cost is
// the packets of its connections that arrive in those microseconds (and a
// new flow then is scheduled by mh's table of the moment: each op rebuilds
// it, ip_vs_mh_dest_changed).
//
// want's destinations need not be sorted (the drains' extras come last);
// the plan sorts them. Edits of destinations in the kept tail are made in
// place; a re-added one takes want's attributes with its add.
func canonicalDests(want, have *VirtualService) []Op {
	wanted := destFinder(want.Dests)
	var ops []Op
	var cur []*Destination // have's list without the destinations removed
	for _, d := range have.Dests {
		if wanted(d.Key) == nil {
			ops = append(ops, Op{Kind: OpDelDest, Service: want, Dest: d})
		} else {
			cur = append(cur, d)
		}
	}
	target := slices.Clone(want.Dests)
	canonicalOrder(target)
	slices.Reverse(target) // the kernel's list, head first
	// k: the longest tail of cur that is the tail of target.
	k := 0
	for k < len(cur) && k < len(target) && cur[len(cur)-1-k].Key == target[len(target)-1-k].Key {
		k++
	}
	curFind := destFinder(cur)
	for i := len(target) - 1; i >= len(target)-k; i-- { // canonical order
		d := target[i]
		if c := curFind(d.Key); !sameDestAttrs(d, c) {
			ops = append(ops, Op{Kind: OpEditDest, Service: want, Dest: d})
		}
	}
	present := destFinder(cur[:len(cur)-k])
	for i := len(target) - k - 1; i >= 0; i-- {
		d := target[i]
		if c := present(d.Key); c != nil {
			ops = append(ops, Op{Kind: OpDelDest, Service: want, Dest: c})
		}
		ops = append(ops, Op{Kind: OpAddDest, Service: want, Dest: d})
	}
	return ops
}

// destFinder looks real servers up by key: a short list (most services have
// a few) is scanned, a long one goes through a map.
func destFinder(ds []*Destination) func(DestKey) *Destination {
	if len(ds) <= 16 {
		return func(k DestKey) *Destination {
			for _, d := range ds {
				if d.Key == k {
					return d
				}
			}
			return nil
		}
	}
	m := make(map[DestKey]*Destination, len(ds))
	for _, d := range ds {
		m[d.Key] = d
	}
	return func(k DestKey) *Destination { return m[k] }
}

func sameServiceAttrs(a, b *VirtualService) bool {
	if a.Scheduler != b.Scheduler || a.Flags&^FlagHashed != b.Flags&^FlagHashed {
		return false
	}
	if a.Flags&FlagPersistent == 0 {
		return true // timeout and netmask only matter with persistence
	}
	return a.Timeout == b.Timeout && a.Netmask == b.Netmask
}

func sameDestAttrs(a, b *Destination) bool {
	return a.Forward == b.Forward && a.Weight == b.Weight &&
		a.UpperThreshold == b.UpperThreshold && a.LowerThreshold == b.LowerThreshold &&
		(a.Forward != ForwardTUN || a.TunType == b.TunType && a.TunPort == b.TunPort && a.TunFlags == b.TunFlags)
}

func sortedServices(in []*VirtualService) []*VirtualService {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b *VirtualService) int { return compareKeys(a.Key, b.Key) })
	return out
}

func compareKeys(a, b ServiceKey) int {
	return cmp.Or(
		cmp.Compare(a.FWMark, b.FWMark),
		cmp.Compare(a.Family, b.Family),
		cmp.Compare(a.Protocol, b.Protocol),
		a.Addr.Compare(b.Addr),
		cmp.Compare(a.Port, b.Port),
	)
}
