package vrrp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"testing"
	"time"
)

// keepalived's wire images for auth_hmac (test/auth_hmac_test.c in
// keepalived 2.4.2 and 2.4.3, "the draft appendix images"): key 00..1f as
// key 1, VRID 51, priority 200, interval 100 cs, sequence
// 0x6800000080000000. IPv4 from 198.51.100.10 for VIP 192.0.2.100 with the
// message-only (RFC 9568) checksum; IPv6 from fe80::10 for VIP fe80::100
// with the checksum to fe80::20 over the trailer too.
const (
	kaVectorIPv4 = "3133c80100644402c0000264" + "010100006800000080000000" + "1b84bc4e8e43892dc6d98448f8ee2265"
	kaVectorIPv6 = "3133c8010064a2e9" + "fe800000000000000000000000000100" + "010100006800000080000000" +
		"c8c56146ebfd66ee10ec4d8186461b78"
	kaSeq = 0x6800000080000000
)

func kaKey() []byte {
	k := make([]byte, 32)
	for i := range k {
		k[i] = byte(i)
	}
	return k
}

func unhex(t testing.TB, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeNow is a settable clock for Auth.
type fakeNow struct{ t time.Time }

func (f *fakeNow) now() time.Time { return f.t }

func testAuth(t testing.TB, clk *fakeNow, cfg AuthConfig) *Auth {
	t.Helper()
	if cfg.Keys == nil {
		cfg.Keys = []AuthKey{{ID: 1, Secret: kaKey()}}
	}
	if cfg.ActiveKey == 0 {
		cfg.ActiveKey = 1
	}
	if cfg.Window == 0 && !cfg.Monotonic {
		cfg.Window = 5 * time.Second
	}
	a, err := newAuthClock(cfg, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAuthKeepalivedVectors: keepalived's own images verify here, and this
// encoder makes the same bytes from the same advert, key and sequence (the
// trailer, and each family's checksum).
func TestAuthKeepalivedVectors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		vec      string
		src, dst netip.Addr
		advert   Advert
	}{
		{"ipv4", kaVectorIPv4, netip.MustParseAddr("198.51.100.10"), GroupIPv4,
			Advert{VRID: 51, Priority: 200, MaxAdvertInterval: 100, Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.100")}, LegacyChecksum: true}},
		{"ipv6", kaVectorIPv6, netip.MustParseAddr("fe80::10"), netip.MustParseAddr("fe80::20"),
			Advert{VRID: 51, Priority: 200, MaxAdvertInterval: 100, Addrs: []netip.Addr{netip.MustParseAddr("fe80::100")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := unhex(t, tc.vec)
			clk := &fakeNow{time.Unix(0x68000000, 0)}
			auth := testAuth(t, clk, AuthConfig{Monotonic: true})
			got, err := ParseAuthAdvert(img, tc.src, tc.dst, auth)
			if err != nil {
				t.Fatalf("keepalived's image refused: %v", err)
			}
			if got.VRID != 51 || got.Priority != 200 || got.Addrs[0] != tc.advert.Addrs[0] {
				t.Errorf("decoded %v", got)
			}
			body, err := tc.advert.body(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			tr := SealWith(1, kaKey(), kaSeq, body, tc.src)
			if enc := tc.advert.finish(body, tr, tc.src, tc.dst); !bytes.Equal(enc, img) {
				t.Errorf("encoded\n%x\nkeepalived's\n%x", enc, img)
			}
			// In time mode the image's 2025 time stamp is stale now.
			fresh := testAuth(t, &fakeNow{time.Now()}, AuthConfig{})
			if _, err := ParseAuthAdvert(img, tc.src, tc.dst, fresh); !errors.Is(err, ErrAuthStale) {
				t.Errorf("time mode, an old image: %v, want %v", err, ErrAuthStale)
			}
		})
	}
}

// TestAuthTamper flips one byte of keepalived's IPv6 image at a time, as
// its own test does: only the checksum (left out of the HMAC, checked on its
// own) does not matter to the HMAC.
func TestAuthTamper(t *testing.T) {
	img := unhex(t, kaVectorIPv6)
	src, dst := netip.MustParseAddr("fe80::10"), netip.MustParseAddr("fe80::20")
	const tr = 24
	for _, tc := range []struct {
		name string
		off  int
		want error
	}{
		{"priority", 2, ErrAuthBadHMAC},
		{"advert interval", 5, ErrAuthBadHMAC},
		{"checksum", 6, ErrChecksum},
		{"vip", 8 + 15, ErrAuthBadHMAC},
		{"ext type", tr, ErrAuthMalformed},
		{"key id", tr + 1, ErrAuthUnknownKey},
		{"reserved", tr + 2, ErrAuthMalformed},
		{"seconds", tr + 4, ErrAuthBadHMAC},
		{"counter", tr + 10, ErrAuthBadHMAC},
		{"hmac", tr + 12, ErrAuthBadHMAC},
		{"hmac end", len(img) - 1, ErrAuthBadHMAC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(img)
			b[tc.off] ^= 1
			if tc.want != ErrChecksum {
				fixChecksum(b, src, dst)
			}
			auth := testAuth(t, &fakeNow{time.Unix(0x68000000, 0)}, AuthConfig{Monotonic: true})
			if _, err := ParseAuthAdvert(b, src, dst, auth); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
	// The pseudo-header binds the source and the VRID.
	auth := testAuth(t, &fakeNow{time.Unix(0x68000000, 0)}, AuthConfig{Monotonic: true})
	other := netip.MustParseAddr("fe80::21")
	b := bytes.Clone(img)
	fixChecksum(b, other, dst)
	if _, err := ParseAuthAdvert(b, other, dst, auth); !errors.Is(err, ErrAuthBadHMAC) {
		t.Errorf("another source: %v", err)
	}
	b = bytes.Clone(img)
	b[1] = 52
	fixChecksum(b, src, dst)
	if _, err := ParseAuthAdvert(b, src, dst, auth); !errors.Is(err, ErrAuthBadHMAC) {
		t.Errorf("another VRID: %v", err)
	}
}

// fixChecksum rewrites an IPv6 packet's checksum (over all of it).
func fixChecksum(b []byte, src, dst netip.Addr) {
	b[6], b[7] = 0, 0
	s := checksum(pseudoSum(src, dst, len(b)), b)
	b[6], b[7] = byte(s>>8), byte(s)
}

func TestAuthRoundTripWrongKeyTruncatedReplay(t *testing.T) {
	src, dst := netip.MustParseAddr("198.18.0.1"), GroupIPv4
	adv := &Advert{VRID: 51, Priority: 255, MaxAdvertInterval: 100, Addrs: []netip.Addr{netip.MustParseAddr("198.18.0.100")}}
	clk := &fakeNow{time.Unix(1_800_000_000, 0)}
	sender := testAuth(t, clk, AuthConfig{})
	recv := testAuth(t, clk, AuthConfig{})
	b, err := adv.MarshalAuth(src, dst, sender)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 12+TrailerLen {
		t.Fatalf("%d bytes", len(b))
	}
	if _, err := ParseAuthAdvert(b, src, dst, recv); err != nil {
		t.Fatalf("signed advert refused: %v", err)
	}
	if _, err := ParseAuthAdvert(b, src, dst, recv); !errors.Is(err, ErrAuthReplay) {
		t.Errorf("the same advert again: %v, want replay", err)
	}
	// An unauthenticated receiver refuses the longer packet, as keepalived does.
	if _, err := ParseAdvert(b, src, dst); !errors.Is(err, ErrAddrCount) {
		t.Errorf("unauthenticated receiver: %v", err)
	}

	wrong := bytes.Repeat([]byte{0xaa}, 32)
	forger := testAuth(t, clk, AuthConfig{Keys: []AuthKey{{ID: 1, Secret: wrong}}})
	clk.t = clk.t.Add(time.Second)
	fb, _ := adv.MarshalAuth(src, dst, forger)
	if _, err := ParseAuthAdvert(fb, src, dst, recv); !errors.Is(err, ErrAuthBadHMAC) {
		t.Errorf("wrong key: %v", err)
	}
	plain, _ := adv.Marshal(src, dst)
	if _, err := ParseAuthAdvert(plain, src, dst, recv); !errors.Is(err, ErrAuthMissing) {
		t.Errorf("no trailer: %v", err)
	}
	zero := *adv
	zero.Priority = 0
	zb, _ := zero.MarshalAuth(src, dst, forger)
	if _, err := ParseAuthAdvert(zb, src, dst, recv); !errors.Is(err, ErrAuthBadHMAC) {
		t.Errorf("forged priority 0: %v", err)
	}
	// Every truncation is refused, none is read as an advert.
	good, _ := adv.MarshalAuth(src, dst, sender)
	for n := range len(good) {
		if _, err := ParseAuthAdvert(good[:n], src, dst, recv); err == nil {
			t.Errorf("truncated to %d bytes: accepted", n)
		}
	}
	if _, err := ParseAuthAdvert(good, src, dst, recv); err != nil {
		t.Errorf("the whole of it after its truncations: %v", err)
	}
	// A capture replayed later is stale, before its HMAC is even computed.
	clk.t = clk.t.Add(10 * time.Second)
	if _, err := ParseAuthAdvert(good, src, dst, recv); !errors.Is(err, ErrAuthStale) {
		t.Errorf("10 s later: %v", err)
	}
	// The sequence grows within one clock reading.
	s1, _ := adv.MarshalAuth(src, dst, sender)
	s2, _ := adv.MarshalAuth(src, dst, sender)
	if _, err := ParseAuthAdvert(s1, src, dst, recv); err != nil {
		t.Errorf("first of two in one instant: %v", err)
	}
	if _, err := ParseAuthAdvert(s2, src, dst, recv); err != nil {
		t.Errorf("second of two in one instant: %v", err)
	}
}

func TestAuthModes(t *testing.T) {
	src, dst := netip.MustParseAddr("2001:db8::1"), GroupIPv6
	adv := &Advert{VRID: 7, Priority: 100, MaxAdvertInterval: 100, Addrs: []netip.Addr{netip.MustParseAddr("2001:db8::100")}}
	clk := &fakeNow{time.Unix(1_800_000_000, 0)}
	plain, _ := adv.Marshal(src, dst)
	for _, tc := range []struct {
		mode       AuthMode
		signs      bool
		plainValid bool
	}{
		{AuthEnforce, true, false}, {AuthPermissive, true, true}, {AuthReceiveOnly, false, true},
	} {
		a := testAuth(t, clk, AuthConfig{Mode: tc.mode})
		b, _ := adv.MarshalAuth(src, dst, a)
		if signed := len(b) > len(plain); signed != tc.signs {
			t.Errorf("%s: signed %v", tc.mode, signed)
		}
		if _, err := ParseAuthAdvert(plain, src, dst, a); (err == nil) != tc.plainValid {
			t.Errorf("%s: unsigned advert: %v", tc.mode, err)
		}
		// A trailer that comes is checked in every mode.
		bad, _ := adv.MarshalAuth(src, dst, testAuth(t, clk, AuthConfig{Keys: []AuthKey{{ID: 1, Secret: bytes.Repeat([]byte{1}, 40)}}}))
		if _, err := ParseAuthAdvert(bad, src, dst, a); !errors.Is(err, ErrAuthBadHMAC) {
			t.Errorf("%s: wrong key: %v", tc.mode, err)
		}
	}
}

// TestAuthRotation: keys 1 and 2 accepted while the senders move from 1 to
// 2, then key 1 dropped; the sequence and the replay marks survive each
// Update (no restart).
func TestAuthRotation(t *testing.T) {
	src, dst := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.3")
	adv := &Advert{VRID: 51, Priority: 200, MaxAdvertInterval: 100, Addrs: []netip.Addr{netip.MustParseAddr("198.18.0.100")}}
	clk := &fakeNow{time.Unix(1_800_000_000, 0)}
	k1, k2 := AuthKey{ID: 1, Secret: kaKey()}, AuthKey{ID: 2, Secret: bytes.Repeat([]byte{0x42}, 48)}
	sender := testAuth(t, clk, AuthConfig{Keys: []AuthKey{k1}, ActiveKey: 1})
	recv := testAuth(t, clk, AuthConfig{Keys: []AuthKey{k1}, ActiveKey: 1})
	step := func(what string, want error) []byte {
		t.Helper()
		clk.t = clk.t.Add(time.Second)
		b, err := adv.MarshalAuth(src, dst, sender)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseAuthAdvert(b, src, dst, recv); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
		return b
	}
	step("key 1", nil)
	both := AuthConfig{Keys: []AuthKey{k1, k2}, ActiveKey: 1, Window: 5 * time.Second}
	if err := recv.Update(both); err != nil {
		t.Fatal(err)
	}
	old := step("key 1, receiver knows 1 and 2", nil)
	both.ActiveKey = 2
	if err := sender.Update(both); err != nil {
		t.Fatal(err)
	}
	step("key 2", nil)
	if _, err := ParseAuthAdvert(old, src, dst, recv); !errors.Is(err, ErrAuthReplay) {
		t.Errorf("an advert signed before the rotation, replayed after: %v", err)
	}
	if err := recv.Update(AuthConfig{Keys: []AuthKey{k2}, ActiveKey: 2, Window: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	step("key 2 only", nil)
	if err := sender.Update(AuthConfig{Keys: []AuthKey{k1}, ActiveKey: 1, Window: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	step("key 1 after it was dropped", ErrAuthUnknownKey)
	if !bytes.Contains([]byte(recv.Describe()), []byte("key 2 (keys 2)")) {
		t.Errorf("describe: %s", recv.Describe())
	}
}

func TestAuthClockStepAndMarkExpiry(t *testing.T) {
	src, dst := netip.MustParseAddr("198.18.0.1"), GroupIPv4
	adv := &Advert{VRID: 51, Priority: 200, MaxAdvertInterval: 100, Addrs: []netip.Addr{netip.MustParseAddr("198.18.0.100")}}
	clk := &fakeNow{time.Unix(1_800_000_000, 0)}
	sender := testAuth(t, clk, AuthConfig{})
	recv := testAuth(t, clk, AuthConfig{})
	b, _ := adv.MarshalAuth(src, dst, sender)
	if _, err := ParseAuthAdvert(b, src, dst, recv); err != nil {
		t.Fatal(err)
	}
	// The sender's clock steps back an hour (and the receiver's with it):
	// the sender restarts from its clock, and the receiver's mark, outside
	// the window, no longer holds it back.
	clk.t = clk.t.Add(-time.Hour)
	b, _ = adv.MarshalAuth(src, dst, sender)
	if _, err := ParseAuthAdvert(b, src, dst, recv); err != nil {
		t.Errorf("after a clock step back: %v", err)
	}
	// Monotonic: no clock, strictly growing only.
	ms := testAuth(t, clk, AuthConfig{Monotonic: true})
	mr := testAuth(t, clk, AuthConfig{Monotonic: true})
	b1, _ := adv.MarshalAuth(src, dst, ms)
	clk.t = clk.t.Add(-time.Hour)
	b2, _ := adv.MarshalAuth(src, dst, ms)
	for i, b := range [][]byte{b1, b2} {
		if _, err := ParseAuthAdvert(b, src, dst, mr); err != nil {
			t.Errorf("monotonic advert %d: %v", i, err)
		}
	}
	if _, err := ParseAuthAdvert(b1, src, dst, mr); !errors.Is(err, ErrAuthReplay) {
		t.Errorf("monotonic replay: %v", err)
	}
}

func TestAuthConfigValidate(t *testing.T) {
	k := kaKey()
	for _, tc := range []struct {
		cfg  AuthConfig
		want string
	}{
		{AuthConfig{Window: time.Second}, "keys: none"},
		{AuthConfig{Keys: []AuthKey{{ID: 1, Secret: k[:31]}}, ActiveKey: 1, Window: time.Second}, "keys[0]: key 1 is 31 bytes long, not 32..64"},
		{AuthConfig{Keys: []AuthKey{{ID: 1, Secret: k}, {ID: 1, Secret: k}}, ActiveKey: 1, Window: time.Second}, "keys[1].id: 1 is given twice"},
		{AuthConfig{Keys: []AuthKey{{ID: 1, Secret: k}}, ActiveKey: 2, Window: time.Second}, "active_key: 2 is not among the keys"},
		{AuthConfig{Keys: []AuthKey{{ID: 1, Secret: k}}, ActiveKey: 1}, "time_window: 0s is out of range 1s..5m0s"},
	} {
		err := tc.cfg.Validate()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	for adv, want := range map[time.Duration]time.Duration{time.Second: 5 * time.Second, 10 * time.Millisecond: 5 * time.Second,
		3 * time.Second: 9 * time.Second, 40950 * time.Millisecond: 120 * time.Second} {
		if got := DefaultWindow(adv); got != want {
			t.Errorf("DefaultWindow(%s) = %s, want %s", adv, got, want)
		}
	}
}

// FuzzParseAuthAdvert: any packet, from any source, through the HMAC
// decoding: no panic, and what verifies is exactly what the encoder makes of
// it (no byte the HMAC leaves loose, but the checksum and the reserved
// interval bits).
func FuzzParseAuthAdvert(f *testing.F) {
	f.Add(unhex(f, kaVectorIPv4), []byte{198, 51, 100, 10}, []byte{224, 0, 0, 18}, uint8(1))
	f.Add(unhex(f, kaVectorIPv6), netip.MustParseAddr("fe80::10").AsSlice(), netip.MustParseAddr("fe80::20").AsSlice(), uint8(1))
	adv := &Advert{VRID: 51, Priority: 255, MaxAdvertInterval: 100, Addrs: []netip.Addr{netip.MustParseAddr("198.18.0.100")}}
	signed, _ := adv.MarshalAuth(netip.MustParseAddr("198.18.0.1"), GroupIPv4,
		testAuth(f, &fakeNow{time.Unix(0x68000000, 0)}, AuthConfig{Monotonic: true}))
	f.Add(signed, []byte{198, 18, 0, 1}, []byte{224, 0, 0, 18}, uint8(0))
	f.Fuzz(func(t *testing.T, pkt, rawSrc, rawDst []byte, mode uint8) {
		src, ok1 := netip.AddrFromSlice(rawSrc)
		dst, ok2 := netip.AddrFromSlice(rawDst)
		if !ok1 || !ok2 || src.Unmap().Is4() != dst.Unmap().Is4() {
			return
		}
		auth := testAuth(t, &fakeNow{time.Unix(0x68000000, 0)}, AuthConfig{Monotonic: true, Mode: AuthMode(mode % 3)})
		a, err := ParseAuthAdvert(pkt, src, dst, auth)
		if err != nil {
			return
		}
		if len(pkt) != advertLen(len(a.Addrs), src)+TrailerLen {
			if auth.cfg.Mode == AuthEnforce {
				t.Fatalf("an advert without trailer passed in enforce mode: %x", pkt)
			}
			return
		}
		body, err := a.body(src)
		if err != nil {
			t.Fatalf("a verified advert does not encode: %v", err)
		}
		tr := pkt[len(pkt)-TrailerLen:]
		seq := uint64(tr[4])<<56 | uint64(tr[5])<<48 | uint64(tr[6])<<40 | uint64(tr[7])<<32 |
			uint64(tr[8])<<24 | uint64(tr[9])<<16 | uint64(tr[10])<<8 | uint64(tr[11])
		want := bytes.Clone(pkt)
		want[4] &= 0x0f // reserved bits, which the HMAC covers as sent
		if want[4] != pkt[4] {
			return
		}
		enc := a.finish(body, SealWith(tr[1], kaKey(), seq, body, src), src, dst)
		enc[6], enc[7], want[6], want[7] = 0, 0, 0, 0
		if !bytes.Equal(enc, want) {
			t.Fatalf("verified\n%x\nre-encoded\n%x", pkt, enc)
		}
	})
}
