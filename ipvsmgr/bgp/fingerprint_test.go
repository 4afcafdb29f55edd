package bgp

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

func compileDoc(t *testing.T, servers string) *ipvsmgr.Desired {
	t.Helper()
	doc := `{"settings": {"bgp": {"asn": 65001, "peers": [{"address": "198.18.0.1", "asn": 65000}]}},
	  "services": [{"name": "web", "protocol": "tcp", "address": "198.18.0.100", "port": 80, "servers": [` + servers + `]},
	               {"name": "dns", "protocol": "udp", "address": "198.18.0.101", "port": 53, "servers": [{"address": "198.18.1.21", "port": 53}]}]}`
	st, err := ipvsmgr.DecodeState(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ipvsmgr.Compile(st)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestFingerprintsFollowTheMaglevInputs(t *testing.T) {
	a := compileDoc(t, `{"address": "198.18.1.12", "weight": 2}, {"address": "198.18.1.11"}`)
	b := compileDoc(t, `{"address": "198.18.1.11"}, {"address": "198.18.1.12", "weight": 2}`)
	fa, fb := Fingerprints(a, a.Table), Fingerprints(b, b.Table)
	if len(fa) != 2 || fa[0].Service != "dns" || fa[1].Service != "web" {
		t.Fatalf("fingerprints = %+v, want dns and web", fa)
	}
	if want := "mh mh-port 198.18.1.11:80/1 198.18.1.12:80/2"; fa[1].Inputs != want {
		t.Errorf("web's inputs = %q, want %q", fa[1].Inputs, want)
	}
	if diff := cmp.Diff(fa, fb); diff != "" {
		t.Errorf("the same servers listed in another order gave other fingerprints (canonical order lost):\n%s", diff)
	}
	if m := Compare(fa, []DirectorFingerprints{{Director: "https://198.18.0.2:3636", Services: fb}}); len(m) != 0 {
		t.Errorf("Compare of equal fingerprints = %+v", m)
	}
	// Another weight, and a kernel that put a re-added server at the end:
	// each changes the table mh builds, and the fingerprint.
	c := compileDoc(t, `{"address": "198.18.1.11"}, {"address": "198.18.1.12", "weight": 3}`)
	fc := Fingerprints(c, c.Table)
	moved := compileDoc(t, `{"address": "198.18.1.11"}, {"address": "198.18.1.12", "weight": 2}`)
	web := moved.Table.Services[0]
	if moved.Names[web.Key] != "web" {
		web = moved.Table.Services[1]
	}
	web.Dests[0], web.Dests[1] = web.Dests[1], web.Dests[0]
	fm := Fingerprints(moved, moved.Table)
	for name, f := range map[string][]ServiceFingerprint{"weight": fc, "order": fm} {
		if f[1].Fingerprint == fa[1].Fingerprint {
			t.Errorf("%s: web's fingerprint %s did not change (%q vs %q)", name, f[1].Fingerprint, f[1].Inputs, fa[1].Inputs)
		}
		if f[0].Fingerprint != fa[0].Fingerprint {
			t.Errorf("%s: dns's fingerprint changed though its inputs did not", name)
		}
	}
	got := Compare(fa, []DirectorFingerprints{
		{Director: "d2", Services: fc},
		{Director: "d3", Services: fm[1:]}, // no dns there
		{Director: "d4", Error: "connection refused"},
	})
	var brief []string
	for _, m := range got {
		brief = append(brief, m.Service+"@"+m.Director+": "+m.Why)
	}
	want := []string{
		"dns@d3: this director has the service in its kernel and the other has not",
		`web@d2: Maglev inputs differ: here "mh mh-port 198.18.1.11:80/1 198.18.1.12:80/2", there "mh mh-port 198.18.1.11:80/1 198.18.1.12:80/3"`,
		`web@d3: Maglev inputs differ: here "mh mh-port 198.18.1.11:80/1 198.18.1.12:80/2", there "mh mh-port 198.18.1.12:80/2 198.18.1.11:80/1"`,
	}
	if diff := cmp.Diff(want, brief); diff != "" {
		t.Errorf("Compare (-want +got):\n%s", diff)
	}
}
