package kernel

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink/nl"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// attrsOf parses one encoded request: header fields and the nested attributes
// of the top-level attribute typ.
func attrsOf(t *testing.T, msg []byte, typ uint16) (cmd uint8, nested map[uint16][]byte) {
	t.Helper()
	if got := native.Uint32(msg); int(got) != len(msg) {
		t.Fatalf("nlmsg_len %d, message is %d bytes", got, len(msg))
	}
	if native.Uint16(msg[6:])&(nlmFRequest|nlmFAck) != nlmFRequest|nlmFAck {
		t.Fatal("request is not flagged REQUEST|ACK")
	}
	top, err := nl.ParseRouteAttr(msg[nlmsgHdrLen+genlHdrLen:])
	if err != nil {
		t.Fatal(err)
	}
	nested = map[uint16][]byte{}
	for _, a := range top {
		if a.Attr.Type != typ {
			continue
		}
		inner, err := nl.ParseRouteAttr(a.Value)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range inner {
			nested[x.Attr.Type] = x.Value
		}
	}
	return msg[nlmsgHdrLen], nested
}

func TestEncodeAddService(t *testing.T) {
	svc := &ipvsmgr.VirtualService{
		Key:       ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv4, Protocol: ipvsmgr.ProtoTCP, Addr: netip.MustParseAddr("198.18.0.100"), Port: 80},
		Scheduler: "wlc", Flags: ipvsmgr.FlagPersistent | ipvsmgr.FlagHashed, Timeout: 300, Netmask: 0xffffff00,
	}
	var e encoder
	e.op(42, 7, ipvsmgr.Op{Kind: ipvsmgr.OpAddService, Service: svc}, true)
	if native.Uint16(e.buf[4:]) != 42 || native.Uint32(e.buf[8:]) != 7 {
		t.Fatalf("family or seq wrong: % x", e.buf[:16])
	}
	cmd, a := attrsOf(t, e.buf, attrCmdService)
	if cmd != cmdNewService {
		t.Fatalf("cmd %d", cmd)
	}
	checks := map[uint16][]byte{
		attrSvcAF:       {2, 0},
		attrSvcProtocol: {6, 0},
		attrSvcAddr:     {198, 18, 0, 100, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		attrSvcPort:     {0, 80},
		attrSvcSched:    []byte("wlc\x00"),
		attrSvcFlags:    {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, // HASHED never written
		attrSvcTimeout:  {0x2c, 1, 0, 0},
		attrSvcNetmask:  {255, 255, 255, 0}, // network byte order, as the kernel reads it
	}
	for typ, want := range checks {
		if !bytes.Equal(a[typ], want) {
			t.Errorf("attr %d = % x, want % x", typ, a[typ], want)
		}
	}
	if got := decodeNetmask(ipvsmgr.FamilyIPv4, native.Uint32(a[attrSvcNetmask])); got != 0xffffff00 {
		t.Errorf("netmask read back as %#x", got)
	}
}

func TestEncodeIPv6AndFWMark(t *testing.T) {
	var e encoder
	fw := &ipvsmgr.VirtualService{Key: ipvsmgr.ServiceKey{Family: ipvsmgr.FamilyIPv6, FWMark: 9}, Scheduler: "mh", Netmask: 64}
	e.op(1, 1, ipvsmgr.Op{Kind: ipvsmgr.OpEditService, Service: fw}, true)
	cmd, a := attrsOf(t, e.buf, attrCmdService)
	if cmd != cmdSetService || native.Uint32(a[attrSvcFWMark]) != 9 || a[attrSvcPort] != nil || a[attrSvcAddr] != nil {
		t.Fatalf("fwmark service encoded as cmd %d attrs %v", cmd, a)
	}
	if native.Uint32(a[attrSvcNetmask]) != 64 {
		t.Errorf("IPv6 prefix length = % x", a[attrSvcNetmask])
	}
	e = encoder{}
	d := &ipvsmgr.Destination{Key: ipvsmgr.DestKey{Addr: netip.MustParseAddr("2001:db8::11"), Port: 8080}, Forward: ipvsmgr.ForwardTUN, Weight: 65535, UpperThreshold: 10, LowerThreshold: 2}
	e.op(1, 2, ipvsmgr.Op{Kind: ipvsmgr.OpAddDest, Service: fw, Dest: d}, true)
	cmd, da := attrsOf(t, e.buf, attrCmdDest)
	_, sa := attrsOf(t, e.buf, attrCmdService)
	if cmd != cmdNewDest || sa[attrSvcSched] != nil {
		t.Fatalf("dest op: cmd %d, service attrs %v (want the key only)", cmd, sa)
	}
	if !bytes.Equal(da[attrDestAddr], netip.MustParseAddr("2001:db8::11").AsSlice()) || binary.BigEndian.Uint16(da[attrDestPort]) != 8080 ||
		native.Uint32(da[attrDestFwd]) != 2 || native.Uint32(da[attrDestWeight]) != 65535 || native.Uint16(da[attrDestAF]) != 10 {
		t.Fatalf("dest attrs %v", da)
	}
}

func TestEncodeBatchIsConcatenated(t *testing.T) {
	var e encoder
	svc := &ipvsmgr.VirtualService{Key: ipvsmgr.ServiceKey{Family: 2, Protocol: 17, Addr: netip.MustParseAddr("198.18.0.1"), Port: 53}, Scheduler: "rr", Netmask: ^uint32(0)}
	e.op(5, 1, ipvsmgr.Op{Kind: ipvsmgr.OpAddService, Service: svc}, false)
	e.op(5, 2, ipvsmgr.Op{Kind: ipvsmgr.OpDelService, Service: svc}, false)
	e.op(5, 3, ipvsmgr.Op{Kind: ipvsmgr.OpSetTimeouts, Timeouts: ipvsmgr.Timeouts{TCP: 900}}, true)
	msgs, err := syscall.ParseNetlinkMessage(e.buf)
	if err != nil || len(msgs) != 3 {
		t.Fatalf("parsed %d messages: %v", len(msgs), err)
	}
	for i, m := range msgs {
		if m.Header.Seq != uint32(i+1) {
			t.Errorf("message %d has seq %d", i, m.Header.Seq)
		}
		// Only the last asks for an ack; the kernel still answers a failure.
		if want := map[bool]uint16{false: nlmFRequest, true: nlmFRequest | nlmFAck}[i == 2]; m.Header.Flags != want {
			t.Errorf("message %d has flags %#x, want %#x", i, m.Header.Flags, want)
		}
	}
}

func TestExplainNamesTheCause(t *testing.T) {
	svc := &ipvsmgr.VirtualService{Scheduler: "mh"}
	err := explain(ipvsmgr.Op{Kind: ipvsmgr.OpAddService, Service: svc}, syscall.ENOENT)
	if want := `no such file or directory: scheduler "mh" is not available in this kernel (module ip_vs_mh)`; err.Error() != want {
		t.Errorf("got %q", err)
	}
}

// The reader parses what the kernel sends back in the same attribute layout
// the encoder writes; a round trip through both must keep every field.
func TestParseRoundTrip(t *testing.T) {
	svcs := []*ipvsmgr.VirtualService{
		{Key: ipvsmgr.ServiceKey{Family: 2, Protocol: 6, Addr: netip.MustParseAddr("198.18.0.100"), Port: 443}, Scheduler: "sh",
			Flags: ipvsmgr.FlagPersistent | ipvsmgr.FlagSched2, Timeout: 60, Netmask: 0xffffff00},
		{Key: ipvsmgr.ServiceKey{Family: 10, FWMark: 3}, Scheduler: "wrr", Netmask: 64},
	}
	for _, s := range svcs {
		var e encoder
		e.service(s, true)
		got := parseService(nestedPayload(append(make([]byte, genlHdrLen), e.buf...), attrCmdService))
		if got.Key != s.Key || got.Scheduler != s.Scheduler || got.Flags != s.Flags || got.Timeout != s.Timeout || got.Netmask != s.Netmask {
			t.Errorf("round trip of %s: got %+v", s.Key, got)
		}
	}
	d := &ipvsmgr.Destination{Key: ipvsmgr.DestKey{Addr: netip.MustParseAddr("2001:db8::11"), Port: 80}, Forward: ipvsmgr.ForwardDR, Weight: 9, UpperThreshold: 5, LowerThreshold: 1}
	var e encoder
	e.dest(d, true)
	got := parseDest(nestedPayload(append(make([]byte, genlHdrLen), e.buf...), attrCmdDest), ipvsmgr.FamilyIPv6)
	if *got != *d {
		t.Errorf("dest round trip: got %+v, want %+v", got, d)
	}
}

func TestParseStats64(t *testing.T) {
	var e encoder
	n := e.nest(attrSvcStats64)
	var b [8]byte
	native.PutUint64(b[:], 1<<40)
	e.attr(1, b[:]) // conns
	e.attr(11, nil) // pad
	e.attr(4, b[:]) // inbytes
	e.endNest(n)
	s := parseService(e.buf)
	if s.Stats.Conns != 1<<40 || s.Stats.InBytes != 1<<40 {
		t.Fatalf("64-bit counters lost: %+v", s.Stats)
	}
}
