package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server"
)

func TestNodeBGPSettingsAndDrain(t *testing.T) {
	k := fakekernel.New()
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	step := func(want int, args ...string) cliRun {
		t.Helper()
		r := runCLI(t, k, append([]string{"--db", db}, args...)...)
		if r.code != want {
			t.Fatalf("ipvsctl %s: exit %d, want %d\n%s%s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
		}
		return r
	}
	step(0, "node", "set", "--router-id", "198.18.0.21", "--bgp-source", "198.18.0.21")
	r := step(0, "node", "drain")
	if !strings.Contains(r.stdout, "drained:     true") || !strings.Contains(r.stdout, "router-id:   198.18.0.21") {
		t.Errorf("node drain:\n%s", r.stdout)
	}
	step(0, "node", "undrain")
	r = step(0, "node", "show", "--json")
	var v server.NodeView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatal(err)
	}
	if v.RouterID != "198.18.0.21" || v.BGPSource != "198.18.0.21" || v.Drained {
		t.Errorf("node show --json: %+v", v)
	}
	r = step(2, "node", "set", "--router-id", "2001:db8::1")
	if !strings.Contains(r.stderr, `router_id: "2001:db8::1" is not an IPv4 address`) {
		t.Errorf("bad router id: %s", r.stderr)
	}
	r = step(2, "node", "set", "--bgp-source", "eth0")
	if !strings.Contains(r.stderr, `bgp_source: "eth0" is not an IP address`) {
		t.Errorf("bad source: %s", r.stderr)
	}
	r = step(0, "audit", "--action", "node set")
	if !strings.Contains(r.stdout, "router_id 198.18.0.21") || !strings.Contains(r.stdout, "drained") {
		t.Errorf("audit:\n%s", r.stdout)
	}
}
