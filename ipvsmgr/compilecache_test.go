package ipvsmgr

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// A chain of edits compiled with a cache gives what Compile gives, and
// compiles only the services that changed.
func TestCompileCacheMatchesCompile(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	st := &State{Settings: Settings{Network: "dr"}}
	for i := range 60 {
		st.Services = append(st.Services, Service{Name: fmt.Sprintf("s%d", i), Address: fmt.Sprintf("198.18.0.%d", i+1), Port: 80,
			Interface: "eth0", Servers: []Server{{Address: "198.18.1.1"}, {Address: "198.18.1.2"}}})
	}
	var cache CompileCache
	for step := range 200 {
		next := *st
		next.Services = append([]Service(nil), st.Services...)
		i := r.IntN(len(next.Services))
		switch r.IntN(5) {
		case 0:
			w := r.IntN(10)
			next.Services[i].Servers = append([]Server{{Address: "198.18.1.9"}}, next.Services[i].Servers...)
			next.Services[i].Servers[0].Weight = &w
		case 1:
			next.Services = append(next.Services[:i], next.Services[i+1:]...)
		case 2:
			next.Services = append(next.Services, Service{Name: fmt.Sprintf("n%d", step), Address: fmt.Sprintf("198.18.2.%d", step%250+1), Port: 443, Servers: []Server{}})
		case 3:
			next.Services[i].Port = 70000 // invalid: both refuse it
		case 4:
			next.Services[i].Name = next.Services[(i+1)%len(next.Services)].Name // a duplicate name
		}
		enc := make([][]byte, len(next.Services))
		for j := range next.Services {
			enc[j] = EncodeService(&next.Services[j])
		}
		want, wantErr := Compile(&next)
		got, gotErr := CompileWith(&next, enc, &cache)
		if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) {
			t.Fatalf("step %d: errors differ:\n Compile: %v\n cached:  %v", step, wantErr, gotErr)
		}
		if d := cmp.Diff(want, got, cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Addr{})); d != "" {
			t.Fatalf("step %d: (-Compile +cached):\n%s", step, d)
		}
		if wantErr == nil {
			st = &next
		}
	}
	// One weight changed: one service compiled, the rest reused.
	enc := make([][]byte, len(st.Services))
	for j := range st.Services {
		enc[j] = EncodeService(&st.Services[j])
	}
	if _, err := CompileWith(st, enc, &cache); err != nil {
		t.Fatal(err)
	}
	before := map[*VirtualService]bool{}
	for _, c := range cache.pieces {
		before[c.vs] = true
	}
	w := 42
	st.Services[3].Servers = append([]Server(nil), st.Services[3].Servers...)
	st.Services[3].Servers[1].Weight = &w
	enc[3] = EncodeService(&st.Services[3])
	d, err := CompileWith(st, enc, &cache)
	if err != nil {
		t.Fatal(err)
	}
	fresh := 0
	for _, vs := range d.Table.Services {
		if !before[vs] {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d services compiled anew after a one-weight change, want 1", fresh)
	}
}
