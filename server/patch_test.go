package server

import (
	"encoding/json"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// A patch's check, sorry server and quorum replace the service's; an empty
// check or sorry server removes it; what the patch leaves out stays.
func TestPatchChecks(t *testing.T) {
	svc := ipvsmgr.Service{Name: "web", Quorum: 2, Check: &ipvsmgr.Check{Type: "tcp"}, SorryServer: &ipvsmgr.SorryServer{Address: "198.18.0.50"},
		Servers: []ipvsmgr.Server{{Address: "198.18.0.11", Check: &ipvsmgr.Check{Port: 8081}}}}
	apply := func(doc string) ipvsmgr.Service {
		t.Helper()
		var p ServicePatch
		if err := json.Unmarshal([]byte(doc), &p); err != nil {
			t.Fatal(err)
		}
		s := svc
		p.ApplyTo(&s)
		return s
	}
	if s := apply(`{"scheduler": "rr"}`); s.Check == nil || s.SorryServer == nil || s.Quorum != 2 {
		t.Fatalf("a patch without them changed the check, sorry server or quorum: %+v", s)
	}
	if s := apply(`{"check": {"type": "http", "path": "/healthz"}, "quorum": 1}`); s.Check.Type != "http" || s.Check.Path != "/healthz" || s.Quorum != 1 {
		t.Fatalf("replace: %+v", s)
	}
	if s := apply(`{"check": {}, "sorry_server": {}}`); s.Check != nil || s.SorryServer != nil {
		t.Fatalf("empty removes: %+v %+v", s.Check, s.SorryServer)
	}
	if svc.Check.Type != "tcp" || svc.SorryServer.Address != "198.18.0.50" {
		t.Fatal("ApplyTo wrote through to the original's check or sorry server")
	}
	rs := svc.Servers[0]
	(&ServerPatch{Check: &ipvsmgr.Check{}}).ApplyTo(&rs)
	if rs.Check != nil {
		t.Fatalf("an empty check left the server's overrides: %+v", rs.Check)
	}
	(&ServerPatch{Check: &ipvsmgr.Check{Path: "/r1"}}).ApplyTo(&rs)
	if rs.Check == nil || rs.Check.Path != "/r1" {
		t.Fatalf("server check: %+v", rs.Check)
	}
}
