package formats

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

const lvsPair = `primary = 198.18.0.2
service = lvs
backup_active = 1
backup = 198.18.0.3
heartbeat = 1
heartbeat_port = 539
keepalive = 0.5
deadtime = 4
network = direct
monitor_links = 1
syncdaemon = 1
syncd_iface = eth1
syncd_id = 7
virtual web {
     address = 198.18.0.100 eth2:1
     port = 80
     server a {
         address = 198.18.0.11
     }
}
`

func TestLVSCFRedundancyImport(t *testing.T) {
	st, err := Import(FormatLVSCF, strings.NewReader(lvsPair))
	if err != nil {
		t.Fatal(err)
	}
	want := &ipvsmgr.Redundancy{VRID: 51, Interface: "eth2", AdvertInterval: 0.5, UnicastPeers: []string{"198.18.0.2", "198.18.0.3"},
		SyncDaemon: true, SyncInterface: "eth1", SyncID: 7, TrackInterfaces: []string{"eth2"}}
	if diff := cmp.Diff(want, st.Settings.Redundancy); diff != "" {
		t.Errorf("redundancy (-want +got):\n%s", diff)
	}
	// deadtime is not three keepalives: kept, and reported.
	var kept []string
	for _, k := range st.Imported {
		kept = append(kept, k.Key+"="+k.Value)
	}
	if diff := cmp.Diff([]string{"service=lvs", "heartbeat_port=539", "deadtime=4", "address alias=1"}, kept); diff != "" {
		t.Errorf("imported keys (-want +got):\n%s", diff)
	}
	var out bytes.Buffer
	if err := Export(FormatLVSCF, st, &out); err != nil {
		t.Fatal(err)
	}
	globals := out.String()[:strings.Index(out.String(), "virtual")]
	wantGlobals := `primary = 198.18.0.2
service = lvs
backup_active = 1
backup = 198.18.0.3
heartbeat = 1
heartbeat_port = 539
keepalive = 0.5
deadtime = 4
network = direct
monitor_links = 1
syncdaemon = 1
syncd_iface = eth1
syncd_id = 7
`
	if diff := cmp.Diff(wantGlobals, globals); diff != "" {
		t.Errorf("exported (-want +got):\n%s", diff)
	}
}

func TestLVSCFRedundancyNotMapped(t *testing.T) {
	for name, doc := range map[string]string{
		"backup inactive": "backup_active = 0\nprimary = 198.18.0.2\nbackup = 198.18.0.3\nkeepalive = 6\n",
		"heartbeat off":   "backup_active = 1\nheartbeat = 0\nprimary = 198.18.0.2\nbackup = 198.18.0.3\n",
		"no backup":       "backup_active = 1\nprimary = 198.18.0.2\nbackup = 0.0.0.0\n",
	} {
		t.Run(name, func(t *testing.T) {
			st, err := Import(FormatLVSCF, strings.NewReader(doc))
			if err != nil {
				t.Fatal(err)
			}
			if st.Settings.Redundancy != nil {
				t.Errorf("redundancy %+v from a file without a working backup", st.Settings.Redundancy)
			}
			if len(st.Imported) != strings.Count(doc, "\n") {
				t.Errorf("imported %v: every key should be kept", st.Imported)
			}
		})
	}
}

func TestLVSCFRedundancyErrors(t *testing.T) {
	for doc, want := range map[string]string{
		"backup_active = 1\nprimary = 198.18.0.2\nbackup = 198.18.0.3\nkeepalive = soon\n": `line 4: keepalive "soon": want a number 0.01..40.95`,
		"backup_active = 1\nprimary = 198.18.0.2\nbackup = 198.18.0.3\nsyncd_id = 300\n":   `line 4: syncd_id "300": want a number 0..255`,
	} {
		_, err := Import(FormatLVSCF, strings.NewReader(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %s", doc, err, want)
		}
	}
}

func TestLVSCFRedundancyExport(t *testing.T) {
	st := &ipvsmgr.State{Services: []ipvsmgr.Service{}, Settings: ipvsmgr.Settings{Redundancy: &ipvsmgr.Redundancy{
		VRID: 52, Interface: "eth0", UnicastPeers: []string{"198.18.0.2", "198.18.0.3"}}},
		// A stale key from an earlier import: the settings win.
		Imported: []ipvsmgr.ImportedKey{{Source: FormatLVSCF, Key: "primary", Value: "198.18.0.9"}}}
	var out bytes.Buffer
	if err := Export(FormatLVSCF, st, &out); err != nil {
		t.Fatal(err)
	}
	want := "primary = 198.18.0.2\nservice = lvs\nbackup_active = 1\nbackup = 198.18.0.3\nheartbeat = 1\nkeepalive = 1\ndeadtime = 3\n" +
		"network = direct\nmonitor_links = 0\nsyncdaemon = 0\nvrrp_vrid = 52\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("exported (-want +got):\n%s", diff)
	}
	back, err := Import(FormatLVSCF, bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	st.Settings.Redundancy.AdvertInterval = 1 // written as keepalive = 1
	if diff := cmp.Diff(st.Settings.Redundancy, back.Settings.Redundancy); diff != "" {
		t.Errorf("re-imported (-want +got):\n%s", diff)
	}

	st.Settings.Redundancy.UnicastPeers = nil
	if err := Export(FormatLVSCF, st, &out); err == nil || !strings.Contains(err.Error(), "settings.redundancy.unicast_peers needs their two addresses") {
		t.Errorf("multicast pair exported to lvs.cf: %v", err)
	}
}
