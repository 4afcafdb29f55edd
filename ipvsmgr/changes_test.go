package ipvsmgr

import (
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
