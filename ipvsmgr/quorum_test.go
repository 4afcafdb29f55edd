package ipvsmgr_test

import (
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// keepalived's update_quorum_state, step by step: quorum 3, hysteresis 1,
// so a held quorum is lost below 2 servers up and a lost one regained at 4;
// none up is always lost; the side at start-up is held only at
// quorum+hysteresis (set_quorum_states).
func TestQuorumTransitions(t *testing.T) {
	if ipvsmgr.QuorumAtStart(3, 3, 1) || !ipvsmgr.QuorumAtStart(4, 3, 1) {
		t.Error("start-up: held only at quorum+hysteresis")
	}
	held := true
	for _, s := range []struct {
		healthy int
		want    bool
	}{{5, true}, {2, true}, {1, false}, {3, false}, {4, true}, {2, true}, {0, false}, {5, true}} {
		got := ipvsmgr.QuorumHeld(held, s.healthy, 3, 1)
		if got != s.want {
			t.Errorf("held=%v, %d up: %v, want %v", held, s.healthy, got, s.want)
		}
		held = got
	}
	// No hysteresis: the quorum alone; quorum 1 is lost only at none.
	if ipvsmgr.QuorumHeld(true, 1, 2, 0) || !ipvsmgr.QuorumHeld(false, 2, 2, 0) || ipvsmgr.QuorumHeld(true, 0, 1, 0) {
		t.Error("no hysteresis")
	}
	// The sorry server follows the same threshold: lost below quorum-hysteresis.
	if ipvsmgr.QuorumThreshold(true, 3, 1) != 2 || ipvsmgr.QuorumThreshold(false, 3, 1) != 4 {
		t.Error("threshold")
	}
}

// HealthyCounts counts the servers in with a weight, and says not known
// while a checked server has not been checked yet.
func TestHealthyCounts(t *testing.T) {
	st, err := ipvsmgr.DecodeState(strings.NewReader(hysteresisDoc))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ipvsmgr.Compile(st)
	if err != nil {
		t.Fatal(err)
	}
	view := &ipvsmgr.HealthView{Servers: map[ipvsmgr.ServerRef]ipvsmgr.ServerHealth{
		ref("198.18.0.100:80", "198.18.0.11:80"): {State: ipvsmgr.HealthUp},
		ref("198.18.0.100:80", "198.18.0.12:80"): {State: ipvsmgr.HealthDown},
	}}
	key := d.Table.Services[0].Key
	if c := ipvsmgr.HealthyCounts(d.Table, d, view)[key]; c.Known || c.Healthy != 1 {
		t.Errorf("three not checked yet: %+v", c)
	}
	for _, a := range []string{"198.18.0.13:80", "198.18.0.14:80", "198.18.0.15:80"} {
		view.Servers[ref("198.18.0.100:80", a)] = ipvsmgr.ServerHealth{State: ipvsmgr.HealthUp}
	}
	if c := ipvsmgr.HealthyCounts(d.Table, d, view)[key]; !c.Known || c.Healthy != 4 {
		t.Errorf("all checked: %+v", c)
	}
}

// quorum_up and quorum_down are validated by field and value.
func TestQuorumProgramValidation(t *testing.T) {
	for _, c := range []struct{ fields, want string }{
		{`"quorum_up":[]`, "services[0].quorum_up: empty"},
		{`"quorum_down":["notify.sh","x"]`, `services[0].quorum_down[0]: "notify.sh" is not an absolute path`},
		{`"quorum_up":["/bin/x","a\u0000b"]`, `services[0].quorum_up[1]: "a\x00b" holds a NUL byte`},
	} {
		doc := `{"services":[{"address":"198.18.0.100","port":80,` + c.fields + `,"servers":[{"address":"198.18.0.11"}]}]}`
		st, err := ipvsmgr.DecodeState(strings.NewReader(doc))
		if err == nil {
			_, err = ipvsmgr.Compile(st)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.fields, err, c.want)
		}
	}
	ok := `{"services":[{"address":"198.18.0.100","port":80,"quorum_up":["/bin/true"],"quorum_down":["/bin/true","x"],"servers":[{"address":"198.18.0.11"}]}]}`
	st, err := ipvsmgr.DecodeState(strings.NewReader(ok))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ipvsmgr.Compile(st)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Sorry) != 1 || d.Sorry[0].QuorumDown[1] != "x" || d.Sorry[0].QuorumUp[0] != "/bin/true" {
		t.Errorf("compiled: %+v", d.Sorry)
	}
}

// Notify programs are validated as quorum programs are, by field and value,
// and the instance's name too.
func TestNotifyProgramValidation(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"services":[{"address":"198.18.0.100","port":80,"servers":[{"address":"198.18.0.11","notify_up":["up.sh"]}]}]}`,
			`services[0].servers[0].notify_up[0]: "up.sh" is not an absolute path`},
		{`{"services":[{"address":"198.18.0.100","port":80,"servers":[{"address":"198.18.0.11","notify_down":[]}]}]}`,
			"services[0].servers[0].notify_down: empty"},
		{`{"settings":{"redundancy":{"vrid":1,"interface":"eth0","notify_master":["master.sh"]}},"services":[]}`,
			`settings.redundancy.notify_master[0]: "master.sh" is not an absolute path`},
		{`{"settings":{"redundancy":{"vrid":1,"interface":"eth0","notify":["/bin/n","a\u0000"]}},"services":[]}`,
			`settings.redundancy.notify[1]: "a\x00" holds a NUL byte`},
		{`{"settings":{"redundancy":{"vrid":1,"interface":"eth0","instance":"VI 1"}},"services":[]}`,
			`settings.redundancy.instance: "VI 1" is not an instance name`},
		{`{"settings":{"redundancy":{"vrid":1,"interface":"eth0","sync_group":{"name":""}}},"services":[]}`,
			`settings.redundancy.sync_group.name: "" is not a sync group name`},
		{`{"settings":{"redundancy":{"vrid":1,"interface":"eth0","sync_group":{"name":"G","notify_backup":["b.sh"]}}},"services":[]}`,
			`settings.redundancy.sync_group.notify_backup[0]: "b.sh" is not an absolute path`},
		{`{"settings":{"redundancy":{"vrid":1,"interface":"eth0","sync_group":{"name":"G","nofity":["/bin/true"]}}},"services":[]}`,
			`nofity`},
	} {
		st, err := ipvsmgr.DecodeState(strings.NewReader(c.doc))
		if err == nil {
			_, err = ipvsmgr.Compile(st)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.doc, err, c.want)
		}
	}
	ok := `{"services":[{"address":"198.18.0.100","port":80,"check":{"type":"tcp"},"servers":[{"address":"198.18.0.11","notify_up":["/bin/true","up"]}]}]}`
	st, err := ipvsmgr.DecodeState(strings.NewReader(ok))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ipvsmgr.Compile(st)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Checks) != 1 || len(d.Checks[0].NotifyUp) != 2 || d.Checks[0].NotifyUp[1] != "up" {
		t.Errorf("compiled: %+v", d.Checks)
	}
}
