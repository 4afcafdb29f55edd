package formats_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/formats"
)

const quorumConf = `virtual_server 198.18.0.100 80 {
    lb_algo rr
    lb_kind NAT
    protocol TCP
    quorum_up "/usr/local/sbin/notify.sh up 'web 1'"
    quorum_down /usr/local/sbin/notify-down.sh
    real_server 198.18.0.11 80 {
        TCP_CHECK {
            connect_timeout 3
        }
    }
}
`

// quorum_up and quorum_down map to the service's programs (the quoted
// command line split as keepalived's notify_script_init), come back from
// an export to keepalived as the same document, and lvs.cf refuses them by
// field; one with a user to run as is kept, not mapped.
func TestKeepalivedQuorumProgramsRoundTrip(t *testing.T) {
	st, rep, err := formats.ImportWith("keepalived", strings.NewReader(quorumConf), formats.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc := st.Services[0]
	if want := []string{"/usr/local/sbin/notify.sh", "up", "web 1"}; !reflect.DeepEqual([]string(svc.QuorumUp), want) {
		t.Errorf("quorum_up = %q, want %q", svc.QuorumUp, want)
	}
	if want := []string{"/usr/local/sbin/notify-down.sh"}; !reflect.DeepEqual([]string(svc.QuorumDown), want) {
		t.Errorf("quorum_down = %q, want %q", svc.QuorumDown, want)
	}
	if len(st.Imported) != 0 {
		t.Errorf("kept: %+v (report %+v)", st.Imported, rep)
	}
	var out bytes.Buffer
	if err := formats.Export("keepalived", st, &out); err != nil {
		t.Fatal(err)
	}
	again, err := formats.Import("keepalived", &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !reflect.DeepEqual(again.Services[0].QuorumUp, svc.QuorumUp) || !reflect.DeepEqual(again.Services[0].QuorumDown, svc.QuorumDown) {
		t.Errorf("after an export:\n%s\nquorum_up %q quorum_down %q", out.String(), again.Services[0].QuorumUp, again.Services[0].QuorumDown)
	}
	out.Reset()
	err = formats.Export("lvs.cf", st, &out)
	if err == nil || !strings.Contains(err.Error(), "services[0].quorum_up") || !strings.Contains(err.Error(), "services[0].quorum_down") {
		t.Errorf("lvs.cf export: %v", err)
	}

	withUser := strings.Replace(quorumConf, `/usr/local/sbin/notify-down.sh`, `"/usr/local/sbin/notify-down.sh" nobody`, 1)
	st, err = formats.Import("keepalived", strings.NewReader(withUser))
	if err != nil {
		t.Fatal(err)
	}
	if st.Services[0].QuorumDown != nil || len(st.Imported) != 1 || st.Imported[0].Key != "quorum_down" {
		t.Errorf("with a user: quorum_down %q, kept %+v", st.Services[0].QuorumDown, st.Imported)
	}
}

// Awkward words in a quorum program survive an export to keepalived and
// back: blanks, braces, a comment sign, an empty word, a line break (a
// quote or a backslash is refused: TestKeepalivedScriptLineAcrossVersions).
func TestKeepalivedQuorumProgramWords(t *testing.T) {
	for _, argv := range [][]string{
		{"/bin/n"},
		{"/bin/n", "{x}", "#1", "!"},
		{"/bin/n", "", "tab\there"},
		{"/opt/my tools/n", "up"},
		{"/bin/n", "a\nb", "\r\x01"},
	} {
		st := &ipvsmgr.State{Services: []ipvsmgr.Service{{Address: "198.18.0.100", Port: 80, Protocol: "tcp", Forwarding: "nat",
			QuorumUp: argv, Servers: []ipvsmgr.Server{{Address: "198.18.0.11", Port: 80}}}}}
		var out bytes.Buffer
		if err := formats.Export("keepalived", st, &out); err != nil {
			t.Errorf("%q: %v", argv, err)
			continue
		}
		again, err := formats.Import("keepalived", &out)
		if err != nil {
			t.Errorf("%q: %v\n%s", argv, err, out.String())
			continue
		}
		if got := again.Services[0].QuorumUp; !reflect.DeepEqual([]string(got), argv) {
			t.Errorf("%q came back %q from\n%s", argv, got, out.String())
		}
	}
}
