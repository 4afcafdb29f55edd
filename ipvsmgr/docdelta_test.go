package ipvsmgr

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// A chain of random states, each a small edit of the one before (a weight,
// a service added, removed or moved, settings, imported keys): every older
// document comes back exactly from its reverse delta and the next one, and
// a delta of a mostly unchanged document is small.
func TestReverseDeltaRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	st := randomState(r, 40)
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
			st.Services = append(st.Services, randomState(r, 1).Services[0])
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
				st.Imported = append(st.Imported, ImportedKey{Source: "lvs.cf", Line: step, Key: "send", Value: `"GET /"`})
			}
		}
		if r.IntN(20) == 0 {
			st.Services = nil
		}
		if len(st.Services) == 0 {
			st.Services = randomState(r, 3).Services
		}
		next, _ := json.Marshal(st)
		delta, err := ReverseDelta(prev, next)
		if err != nil {
			t.Fatal(err)
		}
		back, err := UndoDelta(delta, next)
		if err != nil {
			t.Fatal(err)
		}
		if string(back) != string(prev) {
			t.Fatalf("step %d: rebuilt\n%s\nwant\n%s\ndelta\n%s", step, back, prev, delta)
		}
		prev = next
	}
	// The same document as before but one weight: the delta is a list of indexes and one service.
	big := randomState(r, 500)
	old, _ := json.Marshal(big)
	w := 7
	big.Services[250].Servers = append(big.Services[250].Servers, Server{Address: "198.18.0.99", Weight: &w})
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
