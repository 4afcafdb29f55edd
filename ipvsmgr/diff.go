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
			for _, d := range s.Dests {
				ops = append(ops, Op{Kind: OpAddDest, Service: s, Dest: d})
			}
			continue
		}
		if !sameServiceAttrs(s, cur) {
			ops = append(ops, Op{Kind: OpEditService, Service: s})
		}
		ops = append(ops, diffDests(s, cur)...)
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
