package vrrp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// The authentication trailer is keepalived 2.4's auth_hmac extension
// (vrrp_auth_hmac.c, keepalived 2.4.2 and later; 2.4.0 and 2.4.1 differ), byte for byte: 28 bytes
// after the advert,
//
//	ext_type(1)=1 key_id(1) reserved(2)=0 sec(4) subsec(2) ctr(2) hmac(16)
//
// where sec.subsec.ctr is a 64-bit sequence (UTC seconds, a 1/65536 s
// fraction, a counter) and hmac is HMAC-SHA256, truncated to 16 bytes, over
// a 20-byte pseudo-header (4 or 6, the version, the VRID, 0, the source
// address zero-padded to 16 bytes), the advert with its checksum read as
// zero, the trailer's first 12 bytes and 16 zero bytes. An IPv4 advert's
// checksum covers the advert only; an IPv6 one's covers the trailer too
// (what the kernel computes for keepalived's IPV6_CHECKSUM socket).
const (
	TrailerLen         = 28
	AuthTypeHMACSHA256 = 1
	hmacLen            = 16
	trailerPrefix      = TrailerLen - hmacLen
	pseudoLen          = 20
	// KeyMinLen and KeyMaxLen bound a key, as keepalived does.
	KeyMinLen = 32
	KeyMaxLen = 64
	// MaxWindow bounds the freshness window.
	MaxWindow = 300 * time.Second
	// maxSenders bounds the replay marks kept (one per sender that passed the HMAC).
	maxSenders = 16
)

// Authentication failures; a dropped advert's error wraps one of them.
var (
	ErrAuthMissing    = errors.New("vrrp: advert has no authentication trailer")
	ErrAuthMalformed  = errors.New("vrrp: malformed authentication trailer")
	ErrAuthUnknownKey = errors.New("vrrp: unknown authentication key id")
	ErrAuthBadHMAC    = errors.New("vrrp: authentication HMAC does not match")
	ErrAuthStale      = errors.New("vrrp: authentication time stamp outside the freshness window")
	ErrAuthReplay     = errors.New("vrrp: authentication sequence not above the sender's last (replay)")
)

// AuthMode is how strict a receiver is, and whether the sender signs: the
// two migration modes let a pair move from unauthenticated adverts to signed
// ones (receive-only on both, then permissive, then enforce) without a
// failover.
type AuthMode uint8

const (
	// AuthEnforce signs and accepts only adverts with a valid trailer.
	AuthEnforce AuthMode = iota
	// AuthPermissive signs, and accepts adverts with no trailer too.
	AuthPermissive
	// AuthReceiveOnly sends no trailer, checks one that comes, and accepts
	// adverts without.
	AuthReceiveOnly
)

func (m AuthMode) String() string {
	switch m {
	case AuthEnforce:
		return "enforce"
	case AuthPermissive:
		return "permissive"
	case AuthReceiveOnly:
		return "receive-only"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseAuthMode reads enforce, permissive or receive-only.
func ParseAuthMode(s string) (AuthMode, error) {
	for _, m := range []AuthMode{AuthEnforce, AuthPermissive, AuthReceiveOnly} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%q is not enforce, permissive or receive-only", s)
}

// AuthKey is one shared key and its id (1..255), which the trailer names.
type AuthKey struct {
	ID     uint8
	Secret []byte
}

// AuthConfig is an instance's authentication: every key it accepts, the one
// it signs with, and its replay protection.
type AuthConfig struct {
	Keys      []AuthKey
	ActiveKey uint8
	Mode      AuthMode
	// Monotonic: replay protection by strictly growing sequences only (no
	// clock check); otherwise a time stamp more than Window away from this
	// director's clock is refused (the clocks must agree: NTP).
	Monotonic bool
	Window    time.Duration
}

// DefaultWindow is keepalived's default freshness window: three advert
// intervals in whole seconds, at least 5 s, at most 300 s.
func DefaultWindow(advert time.Duration) time.Duration {
	w := 3 * (advert / time.Second) * time.Second
	return min(max(w, 5*time.Second), MaxWindow)
}

// Validate checks the configuration, naming the field at fault.
func (c *AuthConfig) Validate() error {
	if len(c.Keys) == 0 {
		return errors.New("keys: none")
	}
	seen := map[uint8]bool{}
	active := false
	for i, k := range c.Keys {
		switch {
		case k.ID == 0:
			return fmt.Errorf("keys[%d].id: 0 is out of range 1..255", i)
		case seen[k.ID]:
			return fmt.Errorf("keys[%d].id: %d is given twice", i, k.ID)
		case len(k.Secret) < KeyMinLen || len(k.Secret) > KeyMaxLen:
			return fmt.Errorf("keys[%d]: key %d is %d bytes long, not %d..%d", i, k.ID, len(k.Secret), KeyMinLen, KeyMaxLen)
		}
		seen[k.ID] = true
		active = active || k.ID == c.ActiveKey
	}
	if !active && c.Mode != AuthReceiveOnly {
		return fmt.Errorf("active_key: %d is not among the keys", c.ActiveKey)
	}
	if c.Mode > AuthReceiveOnly {
		return fmt.Errorf("mode: %s", c.Mode)
	}
	if !c.Monotonic && (c.Window < time.Second || c.Window > MaxWindow) {
		return fmt.Errorf("time_window: %s is out of range 1s..%s", c.Window, MaxWindow)
	}
	return nil
}

// Auth signs an instance's adverts and checks its peers': the keys, the
// sequence it sends, and the last sequence each sender was accepted with.
// It is safe for concurrent use (Send, Receive and Update).
type Auth struct {
	now func() time.Time

	mu      sync.Mutex
	cfg     AuthConfig
	keys    map[uint8][]byte
	sendSeq uint64
	marks   map[netip.Addr]*replayMark
	lru     uint64
}

type replayMark struct {
	valid bool
	seq   uint64
	used  uint64
}

// NewAuth checks cfg and returns an Auth on the system clock.
func NewAuth(cfg AuthConfig) (*Auth, error) {
	return newAuthClock(cfg, time.Now)
}

func newAuthClock(cfg AuthConfig, now func() time.Time) (*Auth, error) {
	a := &Auth{now: now, marks: map[netip.Addr]*replayMark{}}
	if err := a.Update(cfg); err != nil {
		return nil, err
	}
	return a, nil
}

// Update takes a new configuration (keys added, rotated or removed, another
// mode) and keeps the sequence sent and the replay marks: a running
// instance changes keys without a restart, so without a failover.
func (a *Auth) Update(cfg AuthConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	keys := make(map[uint8][]byte, len(cfg.Keys))
	for _, k := range cfg.Keys {
		keys[k.ID] = append([]byte(nil), k.Secret...)
	}
	cfg.Keys = nil
	a.mu.Lock()
	a.cfg, a.keys = cfg, keys
	a.mu.Unlock()
	return nil
}

// Signs says whether adverts sent carry a trailer (not in receive-only).
func (a *Auth) Signs() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg.Mode != AuthReceiveOnly
}

// Describe is the configuration in words, for status and logs: "hmac-sha256
// enforce, key 2 (keys 1 2), time window 5s".
func (a *Auth) Describe() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := ""
	for id := 1; id <= 255; id++ {
		if _, ok := a.keys[uint8(id)]; ok {
			ids += fmt.Sprintf(" %d", id)
		}
	}
	replay := "time window " + a.cfg.Window.String()
	if a.cfg.Monotonic {
		replay = "monotonic sequence"
	}
	return fmt.Sprintf("hmac-sha256 %s, key %d (keys%s), %s", a.cfg.Mode, a.cfg.ActiveKey, ids, replay)
}

// nextSeq is keepalived's time-based sequence: the clock, or one more than
// the last when the clock has not moved on (or stepped back); in time mode
// a sequence stranded more than the window ahead of the clock restarts
// from it, as receivers would refuse it anyway.
func (a *Auth) nextSeq() uint64 {
	clk := clockSeq(a.now())
	if seqAfter(clk, a.sendSeq) {
		a.sendSeq = clk
		return clk
	}
	ahead := int32(uint32(a.sendSeq>>32) - uint32(clk>>32))
	if !a.cfg.Monotonic && time.Duration(ahead)*time.Second > a.cfg.Window {
		a.sendSeq = clk
	} else {
		a.sendSeq++
	}
	return a.sendSeq
}

func clockSeq(t time.Time) uint64 {
	sub := uint64(t.Nanosecond()) << 16 / 1e9
	return uint64(uint32(t.Unix()))<<32 | sub<<16
}

// seqAfter is RFC 1982 serial arithmetic over 64 bits.
func seqAfter(a, b uint64) bool { return int64(a-b) > 0 }

// seal returns the trailer for the advert pdu (its checksum is ignored)
// sent from src, with the next sequence: one per advert, the same for
// every unicast peer.
func (a *Auth) seal(pdu []byte, src netip.Addr) []byte {
	a.mu.Lock()
	seq := a.nextSeq()
	id := a.cfg.ActiveKey
	key := a.keys[id]
	a.mu.Unlock()
	return SealWith(id, key, seq, pdu, src)
}

// SealWith is the trailer a sender with key id and secret would append to
// pdu (an advert without trailer) from src at sequence seq: for tests and
// for checking another implementation's vectors.
func SealWith(id uint8, secret []byte, seq uint64, pdu []byte, src netip.Addr) []byte {
	tr := make([]byte, TrailerLen)
	tr[0], tr[1] = AuthTypeHMACSHA256, id
	binary.BigEndian.PutUint64(tr[4:], seq)
	sum := trailerHMAC(secret, src, pdu, tr[:trailerPrefix])
	copy(tr[trailerPrefix:], sum[:])
	return tr
}

// verify checks the trailer (nil when the packet has none) of the advert
// pdu from src: its form, its time stamp (before the HMAC, so that a flood
// of stale captures costs no digest), its key and HMAC, then its sequence
// against the sender's last (only an authentic advert moves the mark).
func (a *Auth) verify(pdu, tr []byte, src netip.Addr) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if tr == nil {
		if a.cfg.Mode == AuthEnforce {
			return ErrAuthMissing
		}
		return nil
	}
	if len(tr) != TrailerLen || tr[0] != AuthTypeHMACSHA256 || tr[2] != 0 || tr[3] != 0 {
		return fmt.Errorf("%w: type %d, reserved %#04x", ErrAuthMalformed, tr[0], binary.BigEndian.Uint16(tr[2:]))
	}
	seq := binary.BigEndian.Uint64(tr[4:])
	now := a.now()
	if !a.cfg.Monotonic {
		if skew := time.Duration(int32(uint32(now.Unix())-uint32(seq>>32))) * time.Second; skew > a.cfg.Window || skew < -a.cfg.Window {
			return fmt.Errorf("%w: %s off this director's clock (window %s)", ErrAuthStale, skew, a.cfg.Window)
		}
	}
	key, ok := a.keys[tr[1]]
	if !ok {
		return fmt.Errorf("%w: %d", ErrAuthUnknownKey, tr[1])
	}
	sum := trailerHMAC(key, src, pdu, tr[:trailerPrefix])
	if !hmac.Equal(sum[:], tr[trailerPrefix:]) {
		return fmt.Errorf("%w: key %d", ErrAuthBadHMAC, tr[1])
	}
	m := a.mark(src)
	if m.valid && !a.cfg.Monotonic {
		// A mark outside the window only orders what the window refuses:
		// forgetting it lets in a sender whose clock was stepped back.
		if age := time.Duration(int32(uint32(now.Unix())-uint32(m.seq>>32))) * time.Second; age > a.cfg.Window || age < -a.cfg.Window {
			m.valid = false
		}
	}
	if m.valid && !seqAfter(seq, m.seq) {
		return fmt.Errorf("%w: %#016x, last %#016x", ErrAuthReplay, seq, m.seq)
	}
	m.seq, m.valid = seq, true
	return nil
}

// mark is the replay mark of a sender that passed the HMAC, made on first
// use; the least recently used one goes when there are too many.
func (a *Auth) mark(src netip.Addr) *replayMark {
	a.lru++
	if m, ok := a.marks[src]; ok {
		m.used = a.lru
		return m
	}
	if len(a.marks) >= maxSenders {
		var victim netip.Addr
		oldest := ^uint64(0)
		for addr, m := range a.marks {
			if m.used < oldest {
				victim, oldest = addr, m.used
			}
		}
		delete(a.marks, victim)
	}
	m := &replayMark{used: a.lru}
	a.marks[src] = m
	return m
}

// trailerHMAC is the trailer's HMAC-SHA256, truncated to 16 bytes.
func trailerHMAC(key []byte, src netip.Addr, pdu, prefix []byte) [hmacLen]byte {
	src = src.Unmap()
	var pseudo [pseudoLen]byte
	pseudo[0] = 6
	if src.Is4() {
		pseudo[0] = 4
	}
	if len(pdu) >= 2 {
		pseudo[1], pseudo[2] = pdu[0]>>4, pdu[1]
	}
	copy(pseudo[4:], src.AsSlice())
	m := hmac.New(sha256.New, key)
	m.Write(pseudo[:])
	if len(pdu) >= headerLen {
		m.Write(pdu[:6])
		m.Write([]byte{0, 0})
		m.Write(pdu[8:])
	} else {
		m.Write(pdu)
	}
	m.Write(prefix)
	m.Write(make([]byte, hmacLen))
	var out [hmacLen]byte
	copy(out[:], m.Sum(nil))
	return out
}
