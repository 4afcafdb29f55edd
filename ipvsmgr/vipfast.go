package ipvsmgr

import (
	"context"
	"slices"
	"sync"
)

// AddVIPs brings vips up now, outside a reconcile: a director that has just
// become VRRP master must answer for its VIPs before anything else. For a
// VIP in the ledger's intent (or already ipvsctl's) it writes nothing
// first: the intent, recorded while the VIP was absent, is what a start
// after a crash goes by (see vipintent.go). A VIP not in it (new since the
// last reconcile) is recorded first, at the cost of a write before its add.
//
// AddVIPs returns holding the reconciler: record brings the ledger up to
// date (the VIPs added are ipvsctl's, one found up is someone else's and
// leaves the intent) and lets it go, so that no reconcile or removal can
// see the ledger without them. Call record once, after the adverts and
// gratuitous ARPs that the VIPs held back.
func (r *Reconciler) AddVIPs(ctx context.Context, vips []VIP) (record func(context.Context) []Failure, fails []Failure) {
	if r.Host == nil || len(vips) == 0 {
		return func(context.Context) []Failure { return nil }, nil
	}
	r.mu.Lock()
	led, err := r.ledger(ctx, true)
	if err != nil {
		r.mu.Unlock()
		return func(context.Context) []Failure { return nil }, []Failure{{Service: "ledger", Change: "load ledger", Err: err.Error()}}
	}
	t := &takeover{r: r, led: led}
	now, first := t.split(ctx, vips)
	for _, v := range now {
		t.add(ctx, v)
	}
	if len(first) > 0 {
		// Recorded as ipvsctl's before they exist: a crash after the add
		// cannot leave one that nobody knows ipvsctl added.
		pre := *led
		pre.VIPs = append(slices.Clone(led.VIPs), first...)
		if err := r.Ledger.SaveLedger(ctx, &pre); err != nil {
			t.fail("ledger", "save ledger", err)
		} else {
			t.led = &pre
			for _, v := range first {
				t.add(ctx, v)
			}
		}
	}
	return t.record, t.fails
}

// takeover is one AddVIPs: the ledger it holds the reconciler on, and what
// its record is to write.
type takeover struct {
	r       *Reconciler
	led     *Ledger
	added   []VIP // by this takeover: ipvsctl's
	foreign []VIP // found up, not ipvsctl's: out of the intent
	fails   []Failure
	once    sync.Once
}

// split decides which VIPs go up at once (in the intent, or ipvsctl's
// already) and which must be recorded first (absent, not in the intent);
// one up that is neither is someone else's, left alone.
func (t *takeover) split(ctx context.Context, vips []VIP) (now, first []VIP) {
	for _, v := range vips {
		if slices.Contains(t.led.Intent, v) || slices.Contains(t.led.VIPs, v) {
			now = append(now, v)
			continue
		}
		up, err := t.r.hasVIP(ctx, v)
		switch {
		case err != nil:
			t.fail(v.String(), "add VIP "+v.String(), err)
		case !up:
			first = append(first, v)
		}
	}
	return now, first
}

func (t *takeover) add(ctx context.Context, v VIP) {
	added, err := t.r.addVIP(ctx, v)
	switch {
	case err != nil:
		t.fail(v.String(), "add VIP "+v.String(), err)
	case added:
		t.r.owns(v, true)
		t.added = append(t.added, v)
		t.r.Log.Info("VIP added", "vip", v.String())
	case !slices.Contains(t.led.VIPs, v):
		t.foreign = append(t.foreign, v)
	}
}

func (t *takeover) fail(what, change string, err error) {
	t.fails = append(t.fails, Failure{Service: what, Change: change, Err: err.Error()})
}

// record writes the ledger the takeover made, and lets the reconciler go.
func (t *takeover) record(ctx context.Context) (fails []Failure) {
	once := false
	t.once.Do(func() { once = true })
	if !once {
		return nil // recorded already: the reconciler was let go then
	}
	r := t.r
	defer r.mu.Unlock()
	next := *t.led
	next.VIPs = slices.Clone(t.led.VIPs)
	for _, v := range t.added {
		if !slices.Contains(next.VIPs, v) {
			next.VIPs = append(next.VIPs, v)
		}
	}
	next.Intent = nil
	for _, v := range t.led.Intent {
		if !slices.Contains(t.foreign, v) {
			next.Intent = append(next.Intent, v)
		}
	}
	if !r.unsaved && len(next.VIPs) == len(t.led.VIPs) && len(next.Intent) == len(t.led.Intent) {
		return nil
	}
	if err := r.Ledger.SaveLedger(ctx, &next); err != nil {
		// Still ipvsctl's (own): the next reconcile records them.
		r.unsaved = true
		return []Failure{{Service: "ledger", Change: "save ledger", Err: err.Error()}}
	}
	r.unsaved = false
	return nil
}

// RemoveVIPs takes down now those of vips that ipvsctl added (the ledger
// says so), outside a reconcile: a director that stops being master lets its
// VIPs go at once. An address someone else put there stays. The intent keeps
// them, absent now: the next takeover adds them before it writes.
func (r *Reconciler) RemoveVIPs(ctx context.Context, vips []VIP) []Failure {
	if r.Host == nil || len(vips) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	led, err := r.ledger(ctx, true)
	if err != nil {
		return []Failure{{Service: "ledger", Change: "load ledger", Err: err.Error()}}
	}
	var fails []Failure
	var kept []VIP
	for _, v := range led.VIPs {
		if !slices.Contains(vips, v) {
			kept = append(kept, v)
			continue
		}
		if err := r.removeVIP(ctx, v); err != nil {
			fails = append(fails, Failure{Service: v.String(), Change: "remove VIP " + v.String(), Err: err.Error()})
			kept = append(kept, v)
			continue
		}
		r.owns(v, false)
		r.Log.Info("VIP removed", "vip", v.String())
	}
	if r.unsaved || len(kept) != len(led.VIPs) {
		next := *led
		next.VIPs = kept
		if err := r.Ledger.SaveLedger(ctx, &next); err != nil {
			r.unsaved = true
			fails = append(fails, Failure{Service: "ledger", Change: "save ledger", Err: err.Error()})
		} else {
			r.unsaved = false
		}
	}
	return fails
}
