package ipvsmgr

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestChanges(t *testing.T) {
	w3, w0 := 3, 0
	old := &State{Services: []Service{
		{Name: "web", Address: "198.18.0.100", Port: 80, Scheduler: "wlc", Servers: []Server{{Name: "r1", Address: "198.18.0.11"}, {Name: "r2", Address: "198.18.0.12", Weight: &w3}}},
		{Name: "old", Address: "198.18.0.101", Port: 80},
	}}
	new := &State{Settings: Settings{TCPTimeout: 900}, Services: []Service{
		{Name: "web", Address: "198.18.0.100", Port: 80, Scheduler: "rr", Servers: []Server{{Name: "r2", Address: "198.18.0.12", Weight: &w0}, {Address: "198.18.0.13"}}},
		{Protocol: "udp", Address: "198.18.0.102", Port: 53},
	}}
	want := []string{
		"~ settings tcp_timeout: 0 -> 900",
		`~ service web scheduler: "wlc" -> "rr"`,
		"~ server web/r2 weight: 3 -> 0",
		"+ server web/198.18.0.13",
		"- server web/r1",
		"+ service udp 198.18.0.102:53",
		"- service old",
	}
	got := Changes(old, new)
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("changes (-want +got):\n%s", d)
	}
	if s := Summary(got); !strings.HasSuffix(s, "and 5 more changes") {
		t.Errorf("summary %q", s)
	}
	if c := Changes(new, new); len(c) != 0 {
		t.Errorf("no change listed %v", c)
	}
}

func TestChangesToMatchesChanges(t *testing.T) {
	w3, w0 := 3, 0
	old := &State{Services: []Service{
		{Name: "same", Address: "198.18.0.99", Port: 80, Servers: []Server{{Address: "198.18.0.11"}}},
		{Name: "web", Address: "198.18.0.100", Port: 80, Servers: []Server{{Name: "r2", Address: "198.18.0.12", Weight: &w3}}},
		{Name: "gone", Address: "198.18.0.101", Port: 80},
	}}
	new := &State{Settings: Settings{Network: "nat"}, Services: []Service{
		{Name: "same", Address: "198.18.0.99", Port: 80, Servers: []Server{{Address: "198.18.0.11"}}},
		{Name: "web", Address: "198.18.0.100", Port: 80, Servers: []Server{{Name: "r2", Address: "198.18.0.12", Weight: &w0}}},
		{Name: "new", Address: "198.18.0.102", Port: 80},
	}}
	doc, _ := json.Marshal(old)
	was, err := ParseStored(doc)
	if err != nil {
		t.Fatal(err)
	}
	// In the same order, and with the unchanged service moved.
	moved := &State{Settings: new.Settings, Services: []Service{new.Services[1], new.Services[2], new.Services[0]}}
	var encoded [][]byte
	for _, st := range []*State{new, moved} {
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
		if d := cmp.Diff(Changes(old, st), got); d != "" {
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
