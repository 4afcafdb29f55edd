package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/ipvsmgrtest"
)

// A chain of random states, each a small edit of the one before (a weight,
// a service added, removed or moved, settings, imported keys): every older
// document comes back exactly from its reverse delta and the next one, each
// from its delta against itself, ChangesTo agrees with Changes and
// ReverseDelta, and a delta of a mostly unchanged document is small.
func TestReverseDeltaRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	st := ipvsmgrtest.RandomState(r, 40)
	prev, _ := json.Marshal(st)
	for step := range 300 {
		switch r.IntN(6) {
		case 0:
			s := &st.Services[r.IntN(len(st.Services))]
			w := r.IntN(100)
			if len(s.Servers) > 0 {
				s.Servers[0].Weight = &w
			}
		case 1:
			st.Services = append(st.Services, ipvsmgrtest.RandomState(r, 1).Services[0])
		case 2:
			if len(st.Services) > 1 {
				i := r.IntN(len(st.Services))
				st.Services = append(st.Services[:i], st.Services[i+1:]...)
			}
		case 3:
			i, j := r.IntN(len(st.Services)), r.IntN(len(st.Services))
			st.Services[i], st.Services[j] = st.Services[j], st.Services[i]
		case 4:
			st.Settings.TCPTimeout = r.IntN(1000)
		case 5:
			if r.IntN(2) == 0 {
				st.Imported = nil
			} else {
				st.Imported = append(st.Imported, ipvsmgr.ImportedKey{Source: "lvs.cf", Line: step, Key: "send", Value: `"GET /"`})
			}
		}
		if r.IntN(20) == 0 {
			st.Services = nil
		}
		if len(st.Services) == 0 {
			st.Services = ipvsmgrtest.RandomState(r, 3).Services
		}
		next, _ := json.Marshal(st)
		checkReverseDelta(t, prev, next)
		checkReverseDelta(t, next, next)
		if step%10 == 0 {
			checkChangesTo(t, prev, next)
		}
		prev = next
	}
	// The same document as before but one weight: the delta is a list of indexes and one service.
	big := ipvsmgrtest.RandomState(r, 500)
	old, _ := json.Marshal(big)
	w := 7
	big.Services[250].Servers = append(big.Services[250].Servers, ipvsmgr.Server{Address: "198.18.0.99", Weight: &w})
	new, _ := json.Marshal(big)
	delta, _ := ReverseDelta(old, new)
	if len(delta) > len(old)/20 {
		t.Errorf("a one-service change gave a delta of %d bytes for a document of %d", len(delta), len(old))
	}
	for _, notStored := range []string{`{"services":[]}`, `{"services":[],"settings":{}}`, `{"settings":{}, "services":[]}`, `{"settings":{},"services":[ ]}`} {
		if _, err := ReverseDelta([]byte(notStored), new); err == nil {
			t.Errorf("%s (not the stored form) was taken", notStored)
		}
	}
	if _, err := UndoDelta([]byte(`{"settings":{},"services":[9999]}`), new); err == nil {
		t.Error("an index past the next revision's services was taken")
	}
}

// checkReverseDelta fails unless old comes back exactly from its reverse
// delta against new.
func checkReverseDelta(t *testing.T, old, new []byte) {
	t.Helper()
	delta, err := ReverseDelta(old, new)
	if err != nil {
		t.Fatalf("reverse delta: %v\n%s\n%s", err, old, new)
	}
	back, err := UndoDelta(delta, new)
	if err != nil || string(back) != string(old) {
		t.Fatalf("rebuilt (%v)\n%s\nwant\n%s\ndelta\n%s", err, back, old, delta)
	}
}

// checkChangesTo fails unless ChangesTo from old to new gives the reverse
// delta ReverseDelta gives and (services named uniquely) the changes Changes
// lists.
func checkChangesTo(t *testing.T, old, new []byte) {
	t.Helper()
	delta, err := ReverseDelta(old, new)
	if err != nil {
		t.Fatalf("reverse delta: %v\n%s\n%s", err, old, new)
	}
	was, err := ParseStored(old)
	if err != nil {
		t.Fatal(err)
	}
	var oldState, newState ipvsmgr.State
	if json.Unmarshal(old, &oldState) != nil || json.Unmarshal(new, &newState) != nil {
		t.Fatalf("not documents:\n%s\n%s", old, new)
	}
	encoded := make([][]byte, len(newState.Services))
	for i := range newState.Services {
		encoded[i] = ipvsmgr.EncodeService(&newState.Services[i])
	}
	changes, prevDelta, err := was.ChangesTo(encoded, &newState)
	if err != nil {
		t.Fatal(err)
	}
	if string(prevDelta) != string(delta) {
		t.Fatalf("ChangesTo's delta\n%s\nReverseDelta's\n%s", prevDelta, delta)
	}
	// Changes pairs services and servers by name: only names unique in each
	// document (and service) make that pairing the one ChangesTo makes.
	if !uniqueNames(&oldState) || !uniqueNames(&newState) {
		return
	}
	if d := cmp.Diff(ipvsmgr.Changes(&oldState, &newState), changes); d != "" {
		t.Fatalf("(-Changes +ChangesTo):\n%s", d)
	}
}

// uniqueNames tells whether the services of st, and the servers of each,
// have distinct names (or keys, or addresses, where they have none).
func uniqueNames(st *ipvsmgr.State) bool {
	services := map[string]bool{}
	for _, s := range st.Services {
		id := s.Name
		switch {
		case id != "":
		case s.FWMark != 0:
			id = fmt.Sprintf("fwmark %d", s.FWMark)
		default:
			id = fmt.Sprintf("%s %s:%d", s.Protocol, s.Address, s.Port)
		}
		servers := map[string]bool{}
		for _, sv := range s.Servers {
			sid := sv.Name
			if sid == "" {
				sid = fmt.Sprintf("%s:%d", sv.Address, sv.Port)
			}
			if servers[sid] {
				return false
			}
			servers[sid] = true
		}
		if services[id] {
			return false
		}
		services[id] = true
	}
	return true
}

// Any two documents, once in the stored form: the older comes back from its
// reverse delta against the newer, and against itself; ChangesTo agrees.
func FuzzReverseDelta(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 4 {
		st := ipvsmgrtest.RandomState(r, 1+r.IntN(4))
		old, _ := json.Marshal(st)
		st.Services = append(st.Services[1:], ipvsmgrtest.RandomState(r, 1).Services[0], st.Services[0])
		new, _ := json.Marshal(st)
		f.Add(old, new)
	}
	f.Add([]byte(`{"settings":{"network":"dr"},"services":[{"name":"web","address":"198.18.0.100","port":80,"servers":[{"address":"198.18.0.11","weight":3}]}]}`),
		[]byte(`{"settings":{},"services":[{"name":"dns","protocol":"udp","address":"198.18.0.53","port":53},{"name":"web","address":"198.18.0.100","port":80,"servers":[{"address":"198.18.0.11","weight":3}]}],"imported":[{"source":"x","line":1,"key":"k","value":"v"}]}`))
	f.Add([]byte(`{"services":null}`), []byte(`{"services":[]}`))
	f.Fuzz(func(t *testing.T, old, new []byte) {
		storedForm := func(doc []byte) ([]byte, bool) {
			st, err := ipvsmgr.DecodeState(bytes.NewReader(doc))
			if err != nil {
				return nil, false
			}
			b, err := json.Marshal(st)
			return b, err == nil
		}
		old, ok1 := storedForm(old)
		new, ok2 := storedForm(new)
		if !ok1 || !ok2 {
			return
		}
		checkReverseDelta(t, old, new)
		checkReverseDelta(t, old, old)
		checkChangesTo(t, old, new)
	})
}

func TestChangesToMatchesChanges(t *testing.T) {
	w3, w0 := 3, 0
	old := &ipvsmgr.State{Services: []ipvsmgr.Service{
		{Name: "same", Address: "198.18.0.99", Port: 80, Servers: []ipvsmgr.Server{{Address: "198.18.0.11"}}},
		{Name: "web", Address: "198.18.0.100", Port: 80, Servers: []ipvsmgr.Server{{Name: "r2", Address: "198.18.0.12", Weight: &w3}}},
		{Name: "gone", Address: "198.18.0.101", Port: 80},
	}}
	new := &ipvsmgr.State{Settings: ipvsmgr.Settings{Network: "nat"}, Services: []ipvsmgr.Service{
		{Name: "same", Address: "198.18.0.99", Port: 80, Servers: []ipvsmgr.Server{{Address: "198.18.0.11"}}},
		{Name: "web", Address: "198.18.0.100", Port: 80, Servers: []ipvsmgr.Server{{Name: "r2", Address: "198.18.0.12", Weight: &w0}}},
		{Name: "new", Address: "198.18.0.102", Port: 80},
	}}
	doc, _ := json.Marshal(old)
	was, err := ParseStored(doc)
	if err != nil {
		t.Fatal(err)
	}
	// In the same order, and with the unchanged service moved.
	moved := &ipvsmgr.State{Settings: new.Settings, Services: []ipvsmgr.Service{new.Services[1], new.Services[2], new.Services[0]}}
	var encoded [][]byte
	for _, st := range []*ipvsmgr.State{new, moved} {
		encoded = nil
		for i := range st.Services {
			b, _ := json.Marshal(&st.Services[i])
			encoded = append(encoded, b)
		}
		got, delta, err := was.ChangesTo(encoded, st)
		if err != nil {
			t.Fatal(err)
		}
		// The stored document comes back from its reverse delta and the new one.
		newDoc, _ := json.Marshal(st)
		if back, err := UndoDelta(delta, newDoc); err != nil || string(back) != string(doc) {
			t.Fatalf("undo of %s gave %s (%v), want %s", delta, back, err, doc)
		}
		if d := cmp.Diff(ipvsmgr.Changes(old, st), got); d != "" {
			t.Fatalf("(-Changes +ChangesTo):\n%s", d)
		}
		if len(got) != 4 {
			t.Fatalf("%d changes, want 4: %v", len(got), got)
		}
	}
	empty, _ := ParseStored(nil)
	if got, delta, _ := empty.ChangesTo(encoded, new); len(got) != 4 || delta != nil {
		t.Fatalf("from nothing: %v", got)
	}
}
