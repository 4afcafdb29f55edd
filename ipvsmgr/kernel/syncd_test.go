package kernel

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

func requireLittleEndian(t *testing.T) {
	if native.Uint16([]byte{1, 0}) != 1 {
		testenv.Need(t, "the expected bytes are written for a little-endian host")
	}
}

// The bytes ipvsadm's libipvs (ipvs_start_daemon: NLA_PUT of state, ifn,
// syncid, then maxlen, port, ttl and group when set, nested in
// IPVS_CMD_ATTR_DAEMON) sends for
// `ipvsadm --start-daemon master --mcast-interface eth0 --syncid 5
// --sync-maxlen 1400 --mcast-port 8849 --mcast-ttl 2 --mcast-group 239.1.1.1`,
// but for the port id, which libnl fills and the kernel ignores.
func TestEncodeNewDaemon(t *testing.T) {
	requireLittleEndian(t)
	var e encoder
	e.newDaemon(0x1c, 7, ipvsmgr.SyncDaemon{State: ipvsmgr.SyncMaster, Interface: "eth0", SyncID: 5, MaxLen: 1400,
		Port: 8849, TTL: 2, Group: netip.MustParseAddr("239.1.1.1")})
	want := []byte{
		84, 0, 0, 0, 0x1c, 0, 5, 0, 7, 0, 0, 0, 0, 0, 0, 0, // nlmsghdr: len, IPVS family, REQUEST|ACK, seq, pid
		9, 1, 0, 0, // genl: IPVS_CMD_NEW_DAEMON, version 1
		64, 0, 3, 0, // IPVS_CMD_ATTR_DAEMON
		8, 0, 1, 0, 1, 0, 0, 0, // STATE master
		9, 0, 2, 0, 'e', 't', 'h', '0', 0, 0, 0, 0, // MCAST_IFN "eth0\0", padded
		8, 0, 3, 0, 5, 0, 0, 0, // SYNC_ID 5
		6, 0, 4, 0, 0x78, 0x05, 0, 0, // SYNC_MAXLEN 1400
		6, 0, 7, 0, 0x91, 0x22, 0, 0, // MCAST_PORT 8849
		5, 0, 8, 0, 2, 0, 0, 0, // MCAST_TTL 2
		8, 0, 5, 0, 239, 1, 1, 1, // MCAST_GROUP, network order
	}
	if !bytes.Equal(e.buf, want) {
		t.Errorf("encoded\n% x\nwant\n% x", e.buf, want)
	}

	// A backup with the defaults: only what the kernel requires.
	e = encoder{}
	e.newDaemon(0x1c, 8, ipvsmgr.SyncDaemon{State: ipvsmgr.SyncBackup, Interface: "vrrp0", SyncID: 51})
	want = []byte{
		52, 0, 0, 0, 0x1c, 0, 5, 0, 8, 0, 0, 0, 0, 0, 0, 0,
		9, 1, 0, 0,
		32, 0, 3, 0,
		8, 0, 1, 0, 2, 0, 0, 0,
		10, 0, 2, 0, 'v', 'r', 'r', 'p', '0', 0, 0, 0,
		8, 0, 3, 0, 51, 0, 0, 0,
	}
	if !bytes.Equal(e.buf, want) {
		t.Errorf("encoded\n% x\nwant\n% x", e.buf, want)
	}

	// IPv6 group.
	e = encoder{}
	e.newDaemon(0x1c, 9, ipvsmgr.SyncDaemon{State: ipvsmgr.SyncMaster, Interface: "eth0", Group: netip.MustParseAddr("ff02::81")})
	_, a := attrsOf(t, e.buf, attrCmdDaemon)
	if g := a[attrDaemonGroup6]; !bytes.Equal(g, netip.MustParseAddr("ff02::81").AsSlice()) {
		t.Errorf("MCAST_GROUP6 % x", g)
	}
}

// ipvs_stop_daemon sends the state and the syncid.
func TestEncodeDelDaemon(t *testing.T) {
	requireLittleEndian(t)
	var e encoder
	e.delDaemon(0x1c, 3, ipvsmgr.SyncBackup, 0)
	want := []byte{
		40, 0, 0, 0, 0x1c, 0, 5, 0, 3, 0, 0, 0, 0, 0, 0, 0,
		10, 1, 0, 0,
		20, 0, 3, 0,
		8, 0, 1, 0, 2, 0, 0, 0,
		8, 0, 3, 0, 0, 0, 0, 0,
	}
	if !bytes.Equal(e.buf, want) {
		t.Errorf("encoded\n% x\nwant\n% x", e.buf, want)
	}
}

// A GET_DAEMON reply as the kernel's ip_vs_genl_fill_daemon builds it
// (state, ifn, syncid, maxlen, port, ttl, group) parses back.
func TestParseDaemon(t *testing.T) {
	want := ipvsmgr.SyncDaemon{State: ipvsmgr.SyncMaster, Interface: "eth0", SyncID: 5, MaxLen: 1472,
		Port: 8848, TTL: 1, Group: netip.MustParseAddr("224.0.0.81")}
	var e encoder
	e.newDaemon(0x1c, 1, want)
	if got := parseDaemon(nestedPayload(e.buf[nlmsgHdrLen:], attrCmdDaemon)); got != want {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
	want.Group = netip.MustParseAddr("ff02::81")
	e = encoder{}
	e.newDaemon(0x1c, 1, want)
	if got := parseDaemon(nestedPayload(e.buf[nlmsgHdrLen:], attrCmdDaemon)); got != want {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
}

func TestCheckSyncDaemon(t *testing.T) {
	ok := ipvsmgr.SyncDaemon{State: ipvsmgr.SyncMaster, Interface: "eth0", SyncID: 1}
	for _, tc := range []struct {
		mod  func(*ipvsmgr.SyncDaemon)
		want string
	}{
		{func(d *ipvsmgr.SyncDaemon) { d.State = 3 }, "state 3"},
		{func(d *ipvsmgr.SyncDaemon) { d.Interface = "" }, "interface"},
		{func(d *ipvsmgr.SyncDaemon) { d.Interface = "a-very-long-name0" }, "interface"},
		{func(d *ipvsmgr.SyncDaemon) { d.SyncID = 256 }, "syncid 256"},
		{func(d *ipvsmgr.SyncDaemon) { d.Group = netip.MustParseAddr("198.18.0.1") }, "not a multicast"},
	} {
		d := ok
		tc.mod(&d)
		if err := checkSyncDaemon(d); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", d, err, tc.want)
		}
	}
	if err := checkSyncDaemon(ok); err != nil {
		t.Error(err)
	}
	if diff := cmp.Diff("master sync daemon on eth0, syncid 1", ok.String()); diff != "" {
		t.Error(diff)
	}
}
