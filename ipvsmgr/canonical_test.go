package ipvsmgr_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// canonSvc is a BGP-mode service with real servers .1x (x in ns), listed
// as given: the kernel's list, head first, for an actual table.
func canonSvc(ns ...int) *ipvsmgr.VirtualService {
	s := &ipvsmgr.VirtualService{Key: ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv4, Protocol: ipvsmgr.ProtoTCP,
		Addr: netip.MustParseAddr("198.18.0.100"), Port: 80}, Scheduler: "mh", Flags: ipvsmgr.FlagSched2}
	for _, n := range ns {
		s.Dests = append(s.Dests, &ipvsmgr.Destination{Key: ipvsmgr.DestKey{Addr: netip.MustParseAddr(fmt.Sprintf("198.18.1.%d", 10+n)), Port: 80},
			Forward: ipvsmgr.ForwardDR, Weight: 1})
	}
	return s
}

func kernelOrder(s *ipvsmgr.VirtualService) []string {
	var out []string
	for _, d := range s.Dests {
		out = append(out, strings.TrimPrefix(d.Key.Addr.String(), "198.18.1."))
	}
	return out
}

// canonicalList is the kernel list, head first, of servers added in
// canonical (ascending) order: descending.
func canonicalList(ns []int) []string {
	s := slices.Clone(ns)
	slices.Sort(s)
	slices.Reverse(s)
	return kernelOrder(canonSvc(s...))
}

// The planner of a BGP-mode service's real servers keeps the kernel's list
// (head first) in canonical order: descending, as adding in ascending order
// at the head leaves it. It re-adds only the servers ahead of the longest
// tail already in place, each deleted just before its add.
func TestCanonicalDestsPlan(t *testing.T) {
	const a, d = "ipvsadm -a -t 198.18.0.100:80 -r 198.18.1.", "ipvsadm -d -t 198.18.0.100:80 -r 198.18.1."
	for _, tc := range []struct {
		name       string
		have, want []int // have: the kernel's list, head first; want: the desired servers
		ops        []string
	}{
		{"already canonical: no ops", []int{3, 2, 1}, []int{1, 2, 3}, nil},
		{"one added that sorts last goes to the head: one add", []int{2, 1}, []int{1, 2, 3}, []string{a + "13:80 -g -w 1"}},
		{"one added in the middle: the one ahead re-added", []int{3, 1}, []int{1, 2, 3},
			[]string{a + "12:80 -g -w 1", d + "13:80", a + "13:80 -g -w 1"}},
		{"one added that sorts first: all re-added", []int{3, 2}, []int{1, 2, 3},
			[]string{a + "11:80 -g -w 1", d + "12:80", a + "12:80 -g -w 1", d + "13:80", a + "13:80 -g -w 1"}},
		{"a running director's head-added server moved into place", []int{2, 3, 1}, []int{1, 2, 3},
			[]string{d + "12:80", a + "12:80 -g -w 1", d + "13:80", a + "13:80 -g -w 1"}},
		{"several at once", []int{5, 3, 1}, []int{1, 2, 3, 4, 5, 6},
			[]string{a + "12:80 -g -w 1", d + "13:80", a + "13:80 -g -w 1", a + "14:80 -g -w 1", d + "15:80", a + "15:80 -g -w 1", a + "16:80 -g -w 1"}},
		{"removal keeps the order: a delete only", []int{3, 2, 1}, []int{1, 3}, []string{d + "12:80"}},
		{"removal and an add", []int{4, 3, 1}, []int{1, 2, 4},
			[]string{d + "13:80", a + "12:80 -g -w 1", d + "14:80", a + "14:80 -g -w 1"}},
		{"a reversed list: its tail must become the head, all re-added", []int{1, 2, 3}, []int{1, 2, 3},
			[]string{d + "11:80", a + "11:80 -g -w 1", d + "12:80", a + "12:80 -g -w 1", d + "13:80", a + "13:80 -g -w 1"}},
		{"into an empty service", nil, []int{2, 1}, []string{a + "11:80 -g -w 1", a + "12:80 -g -w 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, have := canonSvc(tc.want...), canonSvc(tc.have...)
			ops := ipvsmgr.Diff(&ipvsmgr.Table{Services: []*ipvsmgr.VirtualService{want}}, &ipvsmgr.Table{Services: []*ipvsmgr.VirtualService{have}},
				ipvsmgr.DiffOptions{Canonical: true})
			var got []string
			for _, op := range ops {
				got = append(got, op.String())
			}
			if diff := cmp.Diff(tc.ops, got); diff != "" {
				t.Errorf("ops (-want +got):\n%s", diff)
			}
			tab := &ipvsmgr.Table{Services: []*ipvsmgr.VirtualService{have}}
			for _, op := range ops {
				if err := tab.Apply(op); err != nil {
					t.Fatalf("%s: %v", op, err)
				}
			}
			exp := canonicalList(tc.want)
			if diff := cmp.Diff(exp, kernelOrder(tab.Services[0])); diff != "" {
				t.Errorf("kernel list after the ops, head first (-want +got):\n%s", diff)
			}
		})
	}
	// Outside BGP mode nothing is reordered: an add is an add.
	ops := ipvsmgr.Diff(&ipvsmgr.Table{Services: []*ipvsmgr.VirtualService{canonSvc(1, 2, 3)}},
		&ipvsmgr.Table{Services: []*ipvsmgr.VirtualService{canonSvc(3, 1)}}, ipvsmgr.DiffOptions{})
	if len(ops) != 1 || ops[0].Kind != ipvsmgr.OpAddDest {
		t.Errorf("without Canonical: %v, want the one add", ops)
	}
}

// Random kernel lists and desired sets: after the ops the list is in
// canonical order, and no server of the kept tail was touched.
func TestCanonicalDestsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 1))
	for range 500 {
		var have, want []int
		for n := 1; n <= 8; n++ {
			if rng.IntN(2) == 0 {
				have = append(have, n)
			}
			if rng.IntN(3) != 0 {
				want = append(want, n)
			}
		}
		rng.Shuffle(len(have), func(i, j int) { have[i], have[j] = have[j], have[i] })
		hs := canonSvc(have...)
		ops := ipvsmgr.Diff(&ipvsmgr.Table{Services: []*ipvsmgr.VirtualService{canonSvc(want...)}},
			&ipvsmgr.Table{Services: []*ipvsmgr.VirtualService{hs}}, ipvsmgr.DiffOptions{Canonical: true})
		tab := &ipvsmgr.Table{Services: []*ipvsmgr.VirtualService{canonSvc(have...)}}
		touched := map[ipvsmgr.DestKey]int{}
		for _, op := range ops {
			if err := tab.Apply(op); err != nil {
				t.Fatalf("have %v want %v: %s: %v", have, want, op, err)
			}
			if op.Kind == ipvsmgr.OpDelDest || op.Kind == ipvsmgr.OpAddDest {
				touched[op.Dest.Key]++
			}
		}
		exp := canonicalList(want)
		got := kernelOrder(tab.Services[0])
		if !slices.Equal(exp, got) {
			t.Fatalf("have %v want %v: list after %v, want %v", have, want, got, exp)
		}
		// The untouched servers are a tail of the final list: the longest
		// one that was already in place.
		untouched := 0
		for i := len(tab.Services[0].Dests) - 1; i >= 0 && touched[tab.Services[0].Dests[i].Key] == 0; i-- {
			untouched++
		}
		for _, d := range tab.Services[0].Dests[:len(tab.Services[0].Dests)-untouched] {
			if touched[d.Key] == 0 {
				t.Fatalf("have %v want %v: %s untouched but not in the kept tail", have, want, d.Key)
			}
		}
		// And it is the longest such tail: the servers of have (less the
		// removed ones) ahead of it could not have stayed.
		var kept []string
		for _, d := range hs.Dests {
			if slices.Contains(want, int(d.Key.Addr.As4()[3])-10) {
				kept = append(kept, strings.TrimPrefix(d.Key.Addr.String(), "198.18.1."))
			}
		}
		longest := 0
		for longest < len(kept) && longest < len(exp) && kept[len(kept)-1-longest] == exp[len(exp)-1-longest] {
			longest++
		}
		if untouched != longest {
			t.Fatalf("have %v want %v: %d servers left untouched, the longest tail in place has %d", have, want, untouched, longest)
		}
	}
}

// In BGP mode a real server added to the state later is put in its
// canonical place on a running director (the fake kernel adds at the head
// and takes a deleted destination back from its trash as the kernel does):
// its kernel list is then the one a director started afterwards builds,
// and the re-added server keeps its connections' counts.
func TestBGPAddedServerTakesItsCanonicalPlace(t *testing.T) {
	const docT = `{"settings": {"network": "dr", "bgp": {"asn": 65001, "peers": [{"address": "198.18.0.254", "asn": 65000}]}},
	  "services": [{"name": "web", "address": "198.18.0.100", "port": 80,
	    "servers": [%s]}]}`
	srv := func(ns ...int) string {
		var b []string
		for _, n := range ns {
			b = append(b, fmt.Sprintf(`{"address": "198.18.1.%d"}`, 10+n))
		}
		return fmt.Sprintf(docT, strings.Join(b, ", "))
	}
	ctx := context.Background()
	running := newRig(t)
	running.reconcile(t, srv(3, 1))
	svcKey := ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv4, Protocol: ipvsmgr.ProtoTCP, Addr: mustAddr("198.18.0.100"), Port: 80}
	r3 := ipvsmgr.DestKey{Addr: mustAddr("198.18.1.13"), Port: 80}
	running.k.SetActive(svcKey, r3, 7)
	res, ops := running.reconcile(t, srv(1, 3, 2))
	want := []string{
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.1.12:80 -g -w 1",
		"ipvsadm -d -t 198.18.0.100:80 -r 198.18.1.13:80",
		"ipvsadm -a -t 198.18.0.100:80 -r 198.18.1.13:80 -g -w 1",
	}
	if diff := cmp.Diff(want, ops); diff != "" {
		t.Errorf("adding r2 (-want +got):\n%s", diff)
	}
	if len(res.Failures) != 0 {
		t.Errorf("failures: %v", res.Failures)
	}
	fresh := newRig(t)
	fresh.reconcile(t, srv(2, 3, 1))
	a, _ := running.k.Table(ctx)
	b, _ := fresh.k.Table(ctx)
	if diff := cmp.Diff(kernelOrder(b.Services[0]), kernelOrder(a.Services[0])); diff != "" {
		t.Errorf("running director's list differs from a fresh one's (-fresh +running):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"13", "12", "11"}, kernelOrder(a.Services[0])); diff != "" {
		t.Errorf("kernel order (-want +got):\n%s", diff)
	}
	if c := a.Services[0].Dests[0].ActiveConns; c != 7 {
		t.Errorf("r3 re-added with %d active connections, want its 7 (the kernel's trash)", c)
	}
	if c := res.Table.Services[0].Dests[0].ActiveConns; c != 7 {
		t.Errorf("the reconcile's table has r3 at %d active connections, want 7", c)
	}
	if _, ops := running.reconcile(t, srv(1, 2, 3)); len(ops) != 0 {
		t.Errorf("a second reconcile changed %v", ops)
	}
	// The plan (ipvsctl diff, apply --dry-run) shows the same ops.
	plain := newRig(t)
	plain.reconcile(t, srv(3, 1))
	p, err := plain.r.Plan(ctx, mustCompile(t, srv(1, 2, 3)))
	if err != nil {
		t.Fatal(err)
	}
	var planned []string
	for _, op := range p.Ops {
		planned = append(planned, op.String())
	}
	if diff := cmp.Diff(want, planned); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	// Outside BGP mode the same edit is one add at the head.
	noBGP := func(ns ...int) string {
		return strings.Replace(srv(ns...), `, "bgp": {"asn": 65001, "peers": [{"address": "198.18.0.254", "asn": 65000}]}`, "", 1)
	}
	other := newRig(t)
	other.reconcile(t, noBGP(3, 1))
	if _, ops := other.reconcile(t, noBGP(1, 2, 3)); len(ops) != 1 || !strings.HasPrefix(ops[0], "ipvsadm -a") {
		t.Errorf("outside BGP mode: %v, want one add", ops)
	}
}
