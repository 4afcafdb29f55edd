package health

import (
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// sharedDoc is services a and b over the same real server with the same
// check; the test replaces A and B with what a's and b's check and server
// add.
const sharedDoc = `{"services":[
 {"name":"a","address":"198.18.0.100","port":80,"check":{"type":"http","interval":1,"path":"/health"A},
  "servers":[{"name":"ra","address":"198.18.0.11"}]},
 {"name":"b","address":"198.18.0.101","port":80,"check":{"type":"http","interval":1,"path":"/health"B},
  "servers":[{"name":"rb","address":"198.18.0.11"C}]}]}`

func sharedVariant(a, b, server string) string {
	return strings.NewReplacer("A}", a+"}", "B}", b+"}", `"198.18.0.11"C`, `"198.18.0.11"`+server).Replace(sharedDoc)
}

// probeCount is how many distinct checks the runner runs for checks.
func probeCount(t *testing.T, checks []ipvsmgr.ServerCheck) int {
	t.Helper()
	r := NewRunner(Config{Check: newScript().check})
	r.Update(checks)
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.probes)
}

// A check that differs from another in any field of its definition (the
// service's, or a server's override of it) is a probe of its own; what a
// service does with the result (weight, failure action, slow start,
// programs) is its own and shares the probe.
func TestSharedProbeSplitsOnAnyField(t *testing.T) {
	for _, c := range []struct {
		name         string
		a, b, server string
		probes       int
	}{
		{name: "identical", probes: 1},
		{name: "defaults written out", b: `,"method":"GET","rise":2,"fall":3,"timeout":1`, probes: 1},
		{name: "empty expect_status is any", b: `,"expect_status":[]`, probes: 1},
		{name: "server restates the service's check", server: `,"check":{"path":"/health"}`, probes: 1},
		{name: "weight", server: `,"weight":5`, probes: 1},
		{name: "on_failure", b: `,"on_failure":"quiesce"`, probes: 1},
		{name: "slow_start", b: `,"slow_start":10`, probes: 1},
		{name: "start_healthy", b: `,"start_healthy":true`, probes: 1},
		{name: "notify_up", server: `,"notify_up":["/bin/true"]`, probes: 1},
		{name: "forced health", server: `,"health":"auto"`, probes: 1},

		{name: "port", b: `,"port":8080`, probes: 2},
		{name: "address", b: `,"address":"198.18.0.12"`, probes: 2},
		{name: "interval", b: `,"interval":2`, probes: 2},
		{name: "timeout", b: `,"timeout":0.5`, probes: 2},
		{name: "rise", b: `,"rise":1`, probes: 2},
		{name: "fall", b: `,"fall":1`, probes: 2},
		{name: "fast_interval", b: `,"fast_interval":0.5`, probes: 2},
		{name: "down_interval", b: `,"down_interval":5`, probes: 2},
		{name: "warmup", b: `,"warmup":0`, probes: 2},
		{name: "connect_checks", b: `,"connect_checks":2`, probes: 2},
		{name: "path", b: `,"path":"/ready"`, probes: 2},
		{name: "method", b: `,"method":"HEAD"`, probes: 2},
		{name: "host", b: `,"host":"example.org"`, probes: 2},
		{name: "expect_status", b: `,"expect_status":[200]`, probes: 2},
		{name: "expect_body", b: `,"expect_body":"ok"`, probes: 2},
		{name: "type", b: `,"type":"https"`, probes: 2},
		{name: "a server's override", server: `,"check":{"path":"/other"}`, probes: 2},
		{name: "a server's timing override", server: `,"check":{"rise":5}`, probes: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := compile(t, sharedVariant(c.a, c.b, c.server))
			if len(d.Checks) != 2 {
				t.Fatalf("%d checks compiled, want 2", len(d.Checks))
			}
			if n := probeCount(t, d.Checks); n != c.probes {
				t.Errorf("%d probes, want %d\n a: %s\n b: %s", n, c.probes, d.Checks[0].Spec.Key(), d.Checks[1].Spec.Key())
			}
		})
	}
}

// Every field of a compiled check is part of what makes it distinct: a
// field added to CheckSpec later splits too (or this test says which kind
// of field it cannot vary).
func TestSharedProbeKeyCoversEveryField(t *testing.T) {
	base := ipvsmgr.CheckSpec{Type: "http", Target: netip.MustParseAddrPort("198.18.0.11:80"), Interval: time.Second,
		Timeout: time.Second, Rise: 2, Fall: 3, Method: "GET", Path: "/"}
	refA := ipvsmgr.ServerRef{Service: ipvsmgr.ServiceKey{Protocol: 6, Addr: netip.MustParseAddr("198.18.0.100"), Port: 80}}
	refB := refA
	refB.Service.Addr = netip.MustParseAddr("198.18.0.101")
	rt := reflect.TypeFor[ipvsmgr.CheckSpec]()
	for i := range rt.NumField() {
		f := rt.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			other := base
			v := reflect.ValueOf(&other).Elem().Field(i)
			if err := setOther(v); err != nil {
				t.Fatalf("%s: %v", f.Name, err)
			}
			checks := []ipvsmgr.ServerCheck{{Ref: refA, Spec: base}, {Ref: refB, Spec: other}}
			if n := probeCount(t, checks); n != 2 {
				t.Errorf("specs differing in %s alone: %d probe(s), want 2", f.Name, n)
			}
			checks[1].Spec = base
			if n := probeCount(t, checks); n != 1 {
				t.Errorf("equal specs: %d probes, want 1", n)
			}
		})
	}
}

// setOther sets v to a value other than base's for its field.
func setOther(v reflect.Value) error {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 7)
	case reflect.Slice:
		e := reflect.New(v.Type().Elem()).Elem()
		if err := setOther(e); err != nil {
			return err
		}
		v.Set(reflect.Append(v, e))
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if err := setOther(p.Elem()); err != nil {
			return err
		}
		v.Set(p)
	default:
		if ap, ok := v.Addr().Interface().(*netip.AddrPort); ok {
			*ap = netip.AddrPortFrom(ap.Addr(), ap.Port()+1)
			return nil
		}
		return fmt.Errorf("no other value for a %s: teach setOther", v.Type())
	}
	return nil
}

// One probe feeds every service that shares it, and each service's real
// server gets its own health from it: its own weight (a share of the
// agent's percentage of its configured weight), failure action and events.
func TestSharedProbeFeedsEveryService(t *testing.T) {
	d := compile(t, `{"services":[
	 {"name":"a","address":"198.18.0.100","port":80,"check":{"type":"agent","port":9999,"interval":1,"rise":1,"fall":1},
	  "servers":[{"name":"ra","address":"198.18.0.11","weight":8}]},
	 {"name":"b","address":"198.18.0.101","port":80,"check":{"type":"agent","port":9999,"interval":1,"rise":1,"fall":1,"on_failure":"quiesce"},
	  "servers":[{"name":"rb","address":"198.18.0.11","weight":4}]},
	 {"name":"c","address":"198.18.0.102","port":443,"check":{"type":"agent","port":9999,"interval":1,"rise":1,"fall":1},
	  "servers":[{"name":"rc","address":"198.18.0.11","weight":2}]}]}`)
	h := newHarness(t, d)
	const agent = "198.18.0.11:9999"
	r := pass("agent: 50%")
	r.Percent = 50
	h.s.set(agent, r)
	h.step(time.Second, 1)
	h.step(time.Second, 1)
	if calls, _ := h.s.count(agent); calls != 2 {
		t.Errorf("checked %d times in 2 intervals for 3 services, want 2", calls)
	}
	ev := h.takeEvents()
	slices.Sort(ev)
	wantEvents(t, ev, "ra unknown->up agent: 50% weight 4", "rb unknown->up agent: 50% weight 2", "rc unknown->up agent: 50% weight 1")
	view := h.r.View().Servers
	for _, c := range d.Checks {
		if got, want := view[c.Ref].Weight, c.Weight/2; got != want {
			t.Errorf("%s: weight %d, want %d", c.ServerName, got, want)
		}
	}
	h.s.set(agent, fail("agent: down"))
	h.step(time.Second, 1)
	h.mu.Lock()
	quiesced := map[string]bool{}
	for _, e := range h.events {
		if e.To != ipvsmgr.HealthDown {
			t.Errorf("%s: %s->%s, want down", e.ServerName, e.From, e.To)
		}
		quiesced[e.ServerName] = e.Quiesce
	}
	h.events = nil
	h.mu.Unlock()
	if want := map[string]bool{"ra": false, "rb": true, "rc": false}; !maps.Equal(quiesced, want) {
		t.Errorf("down events (server: quiesce) %v, want %v", quiesced, want)
	}
	var last []time.Time
	for _, st := range h.r.Status() {
		last = append(last, st.LastCheck)
	}
	if len(last) != 3 || !last[0].Equal(last[1]) || !last[1].Equal(last[2]) {
		t.Errorf("last checks %v: want the one shared run for all three", last)
	}
}

// An edit that changes one service's check splits that service off (its
// check starts over) while the other keeps its health; an edit that makes
// them equal again joins them, and a service added later over the same
// check takes its health and is told of it as its own change.
func TestSharedProbeEditSplitsAndJoins(t *testing.T) {
	tcp := func(b string) string {
		return strings.ReplaceAll(sharedVariant("", b, ""), `"type":"http","interval":1,"path":"/health"`, `"type":"tcp","interval":1`)
	}
	const target = "198.18.0.11:80"
	h := newHarness(t, compile(t, tcp("")))
	for range 3 {
		h.step(time.Second, 1)
	}
	ev := h.takeEvents()
	slices.Sort(ev)
	wantEvents(t, ev, "ra unknown->up connected", "rb unknown->up connected")

	// b's timeout changes: a probe of its own, which starts over.
	h.r.Update(compile(t, tcp(`,"timeout":0.5`)).Checks)
	if st := h.status("ra"); st.State != ipvsmgr.HealthUp || st.Passes != 3 {
		t.Errorf("a after b's edit: %s, %d passes; want up, kept", st.Phase(), st.Passes)
	}
	if st := h.status("rb"); st.State != ipvsmgr.HealthUnknown {
		t.Errorf("b after its edit: %s, want unchecked (its check starts over)", st.Phase())
	}
	before, _ := h.s.count(target)
	h.step(time.Second, 2)
	h.step(time.Second, 2)
	if after, _ := h.s.count(target); after-before != 4 {
		t.Errorf("%d runs in 2 intervals after the split, want 4 (two probes)", after-before)
	}
	wantEvents(t, h.takeEvents(), "rb unknown->up connected")

	// b back as a's: one probe again; b takes its health, and nothing
	// changed for it, so nothing is told.
	h.r.Update(compile(t, tcp("")).Checks)
	if st := h.status("rb"); st.State != ipvsmgr.HealthUp || st.Passes != 5 {
		t.Errorf("b joined to a again: %s, %d passes; want a's: up, 5", st.Phase(), st.Passes)
	}
	before, _ = h.s.count(target)
	h.step(time.Second, 1)
	if after, _ := h.s.count(target); after-before != 1 {
		t.Errorf("%d runs in an interval after the join, want 1", after-before)
	}
	wantEvents(t, h.takeEvents())

	// c, new, over the same check: up at once (the check has passed), and
	// told as its own change at the next result (its history, notify_up).
	withC := strings.Replace(tcp(""), `]}]}`, `]},
	 {"name":"c","address":"198.18.0.102","port":80,"check":{"type":"tcp","interval":1},"servers":[{"name":"rc","address":"198.18.0.11"}]}]}`, 1)
	d := compile(t, withC)
	h.r.Update(d.Checks)
	if s := h.r.View().Servers[d.Checks[2].Ref]; s.State != ipvsmgr.HealthUp {
		t.Errorf("c's server over an up check: %s, want up", s.State)
	}
	h.step(time.Second, 1)
	wantEvents(t, h.takeEvents(), "rc unknown->up connected")
	h.step(time.Second, 1)
	wantEvents(t, h.takeEvents())
}

// Servers kept in different states that now share one check (an edit made
// while the daemon was down) restore to down, whatever the order they are
// read in: the safe one until the check says.
func TestSharedProbeRestoreDisagreeing(t *testing.T) {
	d := compile(t, sharedVariant("", "", ""))
	for range 20 {
		r := NewRunner(Config{Check: newScript().check})
		r.Update(d.Checks)
		r.Restore(map[ipvsmgr.ServerRef]ipvsmgr.HealthState{d.Checks[0].Ref: ipvsmgr.HealthUp, d.Checks[1].Ref: ipvsmgr.HealthDown})
		for _, st := range r.Status() {
			if st.State != ipvsmgr.HealthDown {
				t.Fatalf("%s restored %s, want down", st.ServerName, st.Phase())
			}
		}
	}
}
