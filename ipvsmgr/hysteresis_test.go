package ipvsmgr_test

import (
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

const hysteresisDoc = `{"services":[{"name":"web","address":"198.18.0.100","port":80,
 "check":{"type":"tcp"}, "quorum":3, "hysteresis":1,
 "sorry_server":{"address":"198.18.0.50"},
 "servers":[{"address":"198.18.0.11"},{"address":"198.18.0.12"},{"address":"198.18.0.13"},{"address":"198.18.0.14"},{"address":"198.18.0.15"}]}]}`

// With quorum 3 and hysteresis 1 the sorry server comes in below 2 servers
// up and leaves at 4, as keepalived's quorum and hysteresis (in servers):
// the kernel, which has the sorry server or not, says which side the
// service is on.
func TestQuorumHysteresis(t *testing.T) {
	addrs := []string{"198.18.0.11:80", "198.18.0.12:80", "198.18.0.13:80", "198.18.0.14:80", "198.18.0.15:80"}
	view := func(upCount int) *ipvsmgr.HealthView {
		v := &ipvsmgr.HealthView{Servers: map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth{}}
		for i, a := range addrs {
			s := ipvsmgr.HealthDown
			if i < upCount {
				s = ipvsmgr.HealthUp
			}
			v.Servers[ref("198.18.0.100:80", a)] = ipvsmgr.ServerHealth{State: s}
		}
		return v
	}
	const add, del = "ipvsadm -a -t 198.18.0.100:80 -r 198.18.0.50:80", "ipvsadm -d -t 198.18.0.100:80 -r 198.18.0.50:80"
	g := newRig(t)
	for _, s := range []struct {
		up   int
		want string // the sorry server's op, "" none
		why  string
	}{
		{5, "", "all up"},
		{2, "", "2 up: below the quorum, not below quorum-hysteresis"},
		{1, add, "1 up: below quorum-hysteresis, the sorry server comes"},
		{3, "", "3 up: the quorum, but not quorum+hysteresis: it stays"},
		{4, del, "4 up: quorum+hysteresis, it goes"},
		{2, "", "2 up again: it stays out"},
	} {
		var got string
		for _, op := range g.reconcileWith(t, hysteresisDoc, view(s.up)) {
			if strings.HasPrefix(op, add) || op == del {
				got = op
			}
		}
		if !strings.HasPrefix(got, s.want) || (s.want == "") != (got == "") {
			t.Errorf("%s: sorry server op %q, want %q", s.why, got, s.want)
		}
	}
	// Without hysteresis, the quorum alone decides: 2 up brings it.
	g = newRig(t)
	noHyst := strings.Replace(hysteresisDoc, `"hysteresis":1,`, "", 1)
	g.reconcileWith(t, noHyst, view(5))
	if ops := g.reconcileWith(t, noHyst, view(2)); !strings.Contains(strings.Join(ops, "\n"), add) {
		t.Errorf("no hysteresis, 2 up of quorum 3: %q", ops)
	}
}

func TestHysteresisValidation(t *testing.T) {
	for doc, want := range map[string]string{
		`{"services":[{"address":"198.18.0.1","port":80,"quorum":2,"hysteresis":2,"servers":[{"address":"198.18.0.11"}]}]}`:  "services[0].hysteresis: 2 is out of range 0..1 (below the quorum, 2)",
		`{"services":[{"address":"198.18.0.1","port":80,"hysteresis":1,"servers":[{"address":"198.18.0.11"}]}]}`:             "services[0].hysteresis: 1 is out of range 0..0",
		`{"services":[{"address":"198.18.0.1","port":80,"quorum":3,"hysteresis":-1,"servers":[{"address":"198.18.0.11"}]}]}`: "services[0].hysteresis: -1 is out of range",
	} {
		st, err := ipvsmgr.DecodeState(strings.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ipvsmgr.Compile(st); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
}
