package formats

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

const syncGroupConf = `global_defs {
    vrrp_version 3
}
vrrp_sync_group VG_LB {
    group {
        VI_OUT
        VI_IN
        VI_DB
        VI_GONE
    }
    notify_master "/etc/keepalived/group.sh master"
    notify_backup /etc/keepalived/group-backup.sh
    notify /usr/local/bin/group-notify
    smtp_alert yes
    track_interface {
        eth2
    }
}
vrrp_instance VI_OUT {
    state MASTER
    interface eth0
    virtual_router_id 51
    priority 150
    advert_int 1
    notify_master /etc/keepalived/master.sh
    virtual_ipaddress {
        198.18.0.10
    }
    virtual_ipaddress_excluded {
        198.18.0.12
        198.18.0.99
    }
}
vrrp_instance VI_IN {
    state BACKUP
    interface eth1
    virtual_router_id 51
    priority 150
    advert_int 1
    virtual_ipaddress {
        198.18.0.11
    }
}
vrrp_instance VI_DB {
    interface eth1
    virtual_router_id 52
    priority 150
    advert_int 1
    virtual_ipaddress {
        198.18.0.13
    }
}
virtual_server 198.18.0.10 80 {
    lb_kind DR
    real_server 198.18.1.1 80 {
    }
}
virtual_server 198.18.0.11 80 {
    lb_kind DR
    real_server 198.18.1.2 80 {
    }
}
virtual_server 198.18.0.12 80 {
    lb_kind DR
    real_server 198.18.1.3 80 {
    }
}
virtual_server 198.18.0.13 3306 {
    lb_kind DR
    real_server 198.18.1.4 3306 {
    }
}
`

// A vrrp_sync_group naming the instance run becomes its sync_group; a
// member that agrees but for its interface and addresses is merged (its
// addresses on its interface, which is tracked), one with another VRID is
// kept and named, as is a name no instance has; the excluded addresses
// stay excluded on export.
func TestKeepalivedSyncGroupImport(t *testing.T) {
	st, rep, err := ImportWith(FormatKeepalived, strings.NewReader(syncGroupConf), Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := st.Settings.Redundancy
	want := &ipvsmgr.SyncGroup{Name: "VG_LB", VRRPNotify: ipvsmgr.VRRPNotify{NotifyMaster: ipvsmgr.Argv{"/etc/keepalived/group.sh", "master"},
		NotifyBackup: ipvsmgr.Argv{"/etc/keepalived/group-backup.sh"}, Notify: ipvsmgr.Argv{"/usr/local/bin/group-notify"}}, SMTPAlert: boolPtr(true)}
	if r == nil || r.Instance != "VI_OUT" || !cmp.Equal(r.SyncGroup, want) {
		t.Fatalf("redundancy %+v, want instance VI_OUT with sync group %+v", r, want)
	}
	if want := []string{"eth2", "eth1"}; !cmp.Equal(r.TrackInterfaces, want) {
		t.Errorf("tracked %q, want the group's eth2 and the merged VI_IN's eth1", r.TrackInterfaces)
	}
	ifaces := map[string]string{}
	for _, svc := range st.Services {
		ifaces[svc.Address] = svc.Interface
	}
	if want := map[string]string{"198.18.0.10": "eth0", "198.18.0.11": "eth1", "198.18.0.12": "eth0", "198.18.0.13": ""}; !cmp.Equal(ifaces, want) {
		t.Errorf("services' interfaces %v, want %v (VI_DB's address not carried)", ifaces, want)
	}
	var keys []string
	for _, k := range st.Imported {
		keys = append(keys, k.Key)
	}
	if want := []string{"global_defs", "vrrp_sync_group VG_LB", "vrrp_instance VI_OUT", "vrrp_instance VI_DB"}; !cmp.Equal(keys, want) {
		t.Errorf("kept %q, want %q (VI_IN merged)", keys, want)
	}
	text := reportText(rep)
	for _, w := range []string{
		"vrrp_sync_group VG_LB: vrrp_instance VI_IN merged into VI_OUT",
		"vrrp_sync_group VG_LB: vrrp_instance VI_DB: virtual_router_id 52, not VI_OUT's 51",
		"vrrp_sync_group VG_LB: group names VI_GONE, which is no vrrp_instance",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("no warning %q in\n%s", w, text)
		}
	}

	var out bytes.Buffer
	if err := Export(FormatKeepalived, st, &out); err != nil {
		t.Fatal(err)
	}
	exp := out.String()
	for _, w := range []string{
		"vrrp_sync_group VG_LB {\n    group {\n        VI_OUT\n        VI_OUT_eth1\n        VI_DB\n        VI_GONE\n    }\n",
		"    virtual_ipaddress_excluded {\n        198.18.0.12\n        198.18.0.99\n    }\n",
		"vrrp_instance VI_OUT_eth1 {\n", "    notify_master \"/etc/keepalived/group.sh master\"\n",
	} {
		if !strings.Contains(exp, w) {
			t.Errorf("the export has no %q:\n%s", w, exp)
		}
	}
	back, _, err := ImportWith(FormatKeepalived, strings.NewReader(exp), Options{})
	if err != nil {
		t.Fatalf("re-import: %v\n%s", err, exp)
	}
	if d := cmp.Diff(st, back, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(ipvsmgr.ImportedKey{}, "Line", "Value")); d != "" {
		t.Errorf("round trip (-imported +re-imported):\n%s\nexport:\n%s", d, exp)
	}
}

// keepalived (Debian's 2.2.7, `keepalived -t`) accepts the export of a
// sync group, made in ipvsctl and imported, in a network namespace that
// has the interfaces the files name.
func TestKeepalivedSyncGroupPassesKeepalivedConfigTest(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Need(t, "needs root for a network namespace with the interfaces the files name")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		testenv.Needf(t, "needs unshare: %v", err)
	}
	setup := "for i in 0 1 2; do ip link add eth$i type veth peer name peer$i && ip link set eth$i up || exit 1; done"
	made := &ipvsmgr.State{Settings: ipvsmgr.Settings{Redundancy: &ipvsmgr.Redundancy{VRID: 51, Interface: "eth0", Instance: "LB",
		TrackInterfaces: []string{"eth1"}, VRRPNotify: ipvsmgr.VRRPNotify{NotifyMaster: ipvsmgr.Argv{"/etc/keepalived/master.sh"}},
		SyncGroup: &ipvsmgr.SyncGroup{Name: "LB_GROUP", VRRPNotify: ipvsmgr.VRRPNotify{NotifyMaster: ipvsmgr.Argv{"/etc/keepalived/group-master.sh"},
			NotifyStop: ipvsmgr.Argv{"/etc/keepalived/group-stop.sh", "now"}, Notify: ipvsmgr.Argv{"/usr/local/bin/ka-group-notify"}}, SMTPAlert: boolPtr(true)}}},
		Services: []ipvsmgr.Service{
			{Protocol: "tcp", Address: "198.18.0.10", Port: 80, Interface: "eth0", Scheduler: "wlc", Forwarding: "dr",
				Servers: []ipvsmgr.Server{{Address: "198.18.1.1", Port: 80}}},
			{Protocol: "tcp", Address: "198.18.0.11", Port: 80, Interface: "eth1", Scheduler: "wlc", Forwarding: "dr",
				Servers: []ipvsmgr.Server{{Address: "198.18.1.2", Port: 80}}},
		}}
	imported, _, err := ImportWith(FormatKeepalived, strings.NewReader(syncGroupConf), Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	orig := filepath.Join(dir, "orig.conf")
	if err := os.WriteFile(orig, []byte(syncGroupConf), 0o644); err != nil {
		t.Fatal(err)
	}
	// The original's one fault, VI_GONE, is the export's too.
	origCode, origText := runKeepalivedTestIn(t, dir, orig, setup)
	if !strings.Contains(origText, "Virtual router VI_GONE specified in sync group VG_LB doesn't exist") {
		t.Errorf("keepalived -t on the original: exit %d\n%s", origCode, origText)
	}
	for name, st := range map[string]*ipvsmgr.State{"made": made, "imported": imported} {
		var out bytes.Buffer
		if err := Export(FormatKeepalived, st, &out); err != nil {
			t.Fatalf("%s: export: %v", name, err)
		}
		file := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		code, text := runKeepalivedTestIn(t, dir, file, setup)
		if name == "imported" && code == origCode {
			text = strings.ReplaceAll(text, "Virtual router VI_GONE specified in sync group VG_LB doesn't exist - ignoring", "")
			code = 0
		}
		if code != 0 || strings.Contains(strings.ToLower(text), "unknown") || strings.Contains(text, "WARNING") ||
			strings.Contains(text, "sync group") {
			t.Errorf("%s: keepalived -t exits %d:\n%s\nexport:\n%s", name, code, text, out.String())
		}
		back, err := Import(FormatKeepalived, bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatalf("%s: re-import: %v", name, err)
		}
		if d := cmp.Diff(st.Settings.Redundancy, back.Settings.Redundancy, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s: the redundancy round trip (-exported +re-imported):\n%s", name, d)
		}
	}
}

// keepalived 2.2.7 skips a vrrp_instance or vrrp_sync_group whose name is
// more than one word ("must have a name"): the import runs neither, keeps
// both as written and says why at their lines.
func TestKeepalivedNameOfTwoWordsIsSkipped(t *testing.T) {
	const conf = "vrrp_sync_group G1 Q {\n  group {\n    VI_1\n  }\n}\n" +
		"vrrp_instance VI_1 {\n  interface eth0\n  virtual_router_id 51\n  virtual_ipaddress {\n    198.18.0.1\n  }\n}\n" +
		"vrrp_instance VI_2 X {\n  interface eth0\n  virtual_router_id 52\n  virtual_ipaddress {\n    198.18.0.2\n  }\n}\n"
	st, rep, err := ImportWith(FormatKeepalived, strings.NewReader(conf), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := st.Settings.Redundancy; r == nil || r.VRID != 51 || r.SyncGroup != nil {
		t.Errorf("redundancy %+v: want VI_1 run, in no sync group", r)
	}
	var said []string
	for _, w := range rep.Warnings {
		said = append(said, w.String())
	}
	for _, want := range []string{"line 1: vrrp_sync_group G1 Q: a name of more than one word, which keepalived skips: kept as written, not run",
		"line 13: vrrp_instance VI_2 X: a name of more than one word, which keepalived skips: kept as written, not run"} {
		if !slices.Contains(said, want) {
			t.Errorf("no warning %q in %q", want, said)
		}
	}
	roundTrip(t, FormatKeepalived, st)
}
