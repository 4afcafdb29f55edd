package vrrp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var addrs = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

func TestKeepalivedAdvertsDecode(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Advert
	}{
		{"keepalived-ipv4.txt", Advert{VRID: 51, Priority: 150, MaxAdvertInterval: 50,
			Addrs: []netip.Addr{netip.MustParseAddr("198.18.0.100"), netip.MustParseAddr("198.18.0.101")}}},
		{"keepalived-ipv6.txt", Advert{VRID: 52, Priority: 200, MaxAdvertInterval: 25,
			Addrs: []netip.Addr{netip.MustParseAddr("2001:db8::100"), netip.MustParseAddr("2001:db8::101")}}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			c := readCaptured(t, tc.file)
			if c.ttl != 255 {
				t.Errorf("keepalived sent TTL %d", c.ttl)
			}
			a, err := ParseAdvert(c.payload, c.src, c.dst)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&tc.want, a, addrs); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
			if a.Interval() != time.Duration(tc.want.MaxAdvertInterval)*10*time.Millisecond {
				t.Errorf("interval %s", a.Interval())
			}
			// Our encoding of the same advert is keepalived's, byte for byte.
			b, err := tc.want.Marshal(c.src, c.dst)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, c.payload) {
				t.Errorf("encoded\n% x\nkeepalived sent\n% x", b, c.payload)
			}
		})
	}
}

// RFC 9568 section 5.2.8: some IPv4 implementations leave the pseudo-header
// out of the checksum; such adverts are accepted, and can be sent.
func TestLegacyIPv4Checksum(t *testing.T) {
	src, dst := netip.MustParseAddr("198.18.0.1"), GroupIPv4
	a := Advert{VRID: 7, Priority: 100, MaxAdvertInterval: 100, Addrs: []netip.Addr{netip.MustParseAddr("198.18.0.100")}, LegacyChecksum: true}
	b, err := a.Marshal(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if checksum(0, b) != 0 {
		t.Fatalf("legacy checksum does not cover the message alone: % x", b)
	}
	got, err := ParseAdvert(b, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if !got.LegacyChecksum {
		t.Error("not marked LegacyChecksum")
	}
	// IPv6 has no such variant.
	src6, dst6 := netip.MustParseAddr("fe80::1"), GroupIPv6
	a.Addrs = []netip.Addr{netip.MustParseAddr("2001:db8::100")}
	b6, _ := a.Marshal(src6, dst6)
	if _, err := ParseAdvert(b6, src6, dst6); err != nil {
		t.Fatalf("IPv6 advert: %v", err)
	}
	binary.BigEndian.PutUint16(b6[6:], 0)
	binary.BigEndian.PutUint16(b6[6:], checksum(0, b6))
	if _, err := ParseAdvert(b6, src6, dst6); !errors.Is(err, ErrChecksum) {
		t.Fatalf("IPv6 advert without pseudo-header: %v, want ErrChecksum", err)
	}
}

func TestParseAdvertErrors(t *testing.T) {
	src, dst := netip.MustParseAddr("198.18.0.1"), GroupIPv4
	good := func() []byte {
		b, err := (&Advert{VRID: 51, Priority: 100, MaxAdvertInterval: 100,
			Addrs: []netip.Addr{netip.MustParseAddr("198.18.0.100")}}).Marshal(src, dst)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	resum := func(b []byte) []byte {
		binary.BigEndian.PutUint16(b[6:], 0)
		binary.BigEndian.PutUint16(b[6:], checksum(pseudoSum(src, dst, len(b)), b))
		return b
	}
	for _, tc := range []struct {
		name string
		pkt  []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"short", good()[:7], ErrTruncated},
		{"version 2", resum(append([]byte{0x21}, good()[1:]...)), ErrVersion},
		{"type 2", resum(append([]byte{0x32}, good()[1:]...)), ErrType},
		{"vrid 0", resum(func() []byte { b := good(); b[1] = 0; return b }()), ErrVRID},
		{"interval 0", resum(func() []byte { b := good(); b[4], b[5] = 0xf0, 0; return b }()), ErrInterval},
		{"count 0", resum(func() []byte { b := good(); b[3] = 0; return b[:8] }()), ErrNoAddrs},
		{"count 2, one address", resum(func() []byte { b := good(); b[3] = 2; return b }()), ErrAddrCount},
		{"trailing bytes", resum(append(good(), 0, 0, 0, 0)), ErrAddrCount},
		{"checksum", func() []byte { b := good(); b[7] ^= 1; return b }(), ErrChecksum},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseAdvert(tc.pkt, src, dst); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// The reserved bits are ignored.
	b := good()
	b[4] |= 0xf0
	if a, err := ParseAdvert(resum(b), src, dst); err != nil || a.MaxAdvertInterval != 100 {
		t.Fatalf("reserved bits set: %v, %v", a, err)
	}
}

func TestMarshalErrors(t *testing.T) {
	src, dst := netip.MustParseAddr("198.18.0.1"), GroupIPv4
	v4 := []netip.Addr{netip.MustParseAddr("198.18.0.100")}
	for _, tc := range []struct {
		name string
		a    Advert
		want error
	}{
		{"vrid 0", Advert{Priority: 1, MaxAdvertInterval: 1, Addrs: v4}, ErrVRID},
		{"interval 0", Advert{VRID: 1, Addrs: v4}, ErrInterval},
		{"interval 4096", Advert{VRID: 1, MaxAdvertInterval: 4096, Addrs: v4}, ErrInterval},
		{"no addresses", Advert{VRID: 1, MaxAdvertInterval: 1}, ErrNoAddrs},
		{"mixed families", Advert{VRID: 1, MaxAdvertInterval: 1, Addrs: []netip.Addr{netip.MustParseAddr("2001:db8::1")}}, ErrAddrFamily},
		{"256 addresses", Advert{VRID: 1, MaxAdvertInterval: 1, Addrs: make([]netip.Addr, 256)}, ErrTooManyAddr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.a.Marshal(src, dst); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCentiseconds(t *testing.T) {
	for d, want := range map[time.Duration]uint16{
		0: 1, time.Millisecond: 1, 10 * time.Millisecond: 1, 14 * time.Millisecond: 1, 15 * time.Millisecond: 2,
		time.Second: 100, 40950 * time.Millisecond: 4095, time.Minute: 4095,
	} {
		if got := Centiseconds(d); got != want {
			t.Errorf("Centiseconds(%s) = %d, want %d", d, got, want)
		}
	}
}

func FuzzParseAdvert(f *testing.F) {
	for _, name := range []string{"keepalived-ipv4.txt", "keepalived-ipv6.txt"} {
		c := readCaptured(f, name)
		f.Add(c.payload, c.src.AsSlice(), c.dst.AsSlice())
	}
	f.Add([]byte{0x31, 1, 0, 1, 0, 1, 0, 0, 1, 2, 3, 4}, []byte{198, 18, 0, 1}, []byte{224, 0, 0, 18})
	f.Fuzz(func(t *testing.T, pkt, rawSrc, rawDst []byte) {
		src, ok1 := netip.AddrFromSlice(rawSrc)
		dst, ok2 := netip.AddrFromSlice(rawDst)
		if !ok1 || !ok2 || src.Unmap().Is4() != dst.Unmap().Is4() {
			return
		}
		a, err := ParseAdvert(pkt, src, dst)
		if err != nil {
			return
		}
		b, err := a.Marshal(src, dst)
		if err != nil {
			t.Fatalf("a decoded advert does not encode: %v (%v)", err, a)
		}
		// Equal but for the reserved bits, which are ignored, and the
		// checksum, which covers them.
		want := bytes.Clone(pkt)
		want[4] &= 0x0f
		want[6], want[7], b[6], b[7] = 0, 0, 0, 0
		if !bytes.Equal(b, want) {
			t.Fatalf("re-encoded\n% x\nfrom\n% x", b, pkt)
		}
		again, err := ParseAdvert(mustMarshal(t, a, src, dst), src, dst)
		if err != nil {
			t.Fatalf("re-encoded advert does not decode: %v", err)
		}
		if diff := cmp.Diff(a, again, addrs); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

func mustMarshal(t *testing.T, a *Advert, src, dst netip.Addr) []byte {
	b, err := a.Marshal(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
