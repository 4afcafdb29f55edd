package redundancy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/vrrp"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/metrics"
)

// authInterval is the auth tests' advert interval, slower than
// pairState's 0.1 s: these tests assert that nothing moves, and at 0.1 s,
// then 0.3 s, a stall of a loaded test machine (-race on 2 cores beside
// other packages) was a failover of its own. quiet is how long "nothing
// moved" is watched: a resignation moves the VIP within the skew time
// (0.6 interval for b), a restart's takeover within the down interval.
const (
	authInterval = 1.0
	quietFor     = 2500 * time.Millisecond
)

// authState is pairState with settings.redundancy.auth, at authInterval.
func authState(auth string) string {
	return fmt.Sprintf(`{"settings": {"redundancy": {"vrid": 51, "interface": "eth0", "advert_interval": %g,
  "unicast_peers": ["198.18.0.2", "198.18.0.3"], "auth": %s}},
 "services": [{"name": "web", "address": "198.18.0.100", "port": 80, "interface": "eth0", "scheduler": "rr",
   "servers": [{"name": "r1", "address": "198.18.0.11"}]}]}`, authInterval, auth)
}

func writeKey(t *testing.T, dir, name string, b byte) (string, []byte) {
	t.Helper()
	key := bytes.Repeat([]byte{b}, 32)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(fmt.Sprintf("hex:%x\n", key)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, key
}

func transitions(d *director) int {
	n := 0
	if r := d.status(); r != nil {
		for _, c := range r.TransitionCounts {
			n += c
		}
	}
	return n
}

func dropped(d *director, reason string) uint64 {
	var n uint64
	if r := d.status(); r != nil {
		for _, f := range r.Families {
			n += f.Dropped[reason]
		}
	}
	return n
}

// A keyed pair: forged adverts (priority 255 with a wrong key, priority 0
// with no trailer, a captured one replayed) change nothing and are counted
// by reason; the keys rotate through three revisions made on the master
// (key 2 added, then signing, then key 1 dropped) with no transition on
// either director; the keys never show in the API or the history; and the
// master's death still hands the VIP over.
func TestPairAuthForgeryRotationFailover(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	k1, key1 := writeKey(t, dir, "k1", 0x11)
	k2, key2 := writeKey(t, dir, "k2", 0x22)
	h := &hub{}
	a, b := newDirector(t, "198.18.0.2", 200), newDirector(t, "198.18.0.3", 100)
	apply := func(auth string) {
		t.Helper()
		if _, err := a.core.Apply(ctx, admin, strings.NewReader(authState(auth)), "state.json", server.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "b's copy of a's revision", func() bool { return b.head().Hash == a.head().Hash })
	}
	if _, err := a.core.Apply(ctx, admin, strings.NewReader(authState(`{"keys": [{"id": 1, "file": "`+k1+`"}]}`)), "state.json",
		server.WriteOptions{NoApply: true}); err != nil {
		t.Fatal(err)
	}
	a.peerWith(b)
	b.peerWith(a)
	a.start(h, quiet())
	b.start(h, quiet())
	eventually(t, 10*time.Second, "a master with the VIP and b a backup without it", func() bool {
		return a.role() == "master" && a.hasVIP() && b.role() == "backup" && !b.hasVIP()
	})
	if s := b.status(); !strings.HasPrefix(s.Auth, "hmac-sha256 enforce, key 1 (keys 1)") {
		t.Errorf("b's status says adverts are %q", s.Auth)
	}

	// Forgeries from a host on the link, spoofing the master's address.
	adv := func(prio uint8) *vrrp.Advert {
		return &vrrp.Advert{VRID: 51, Priority: prio, MaxAdvertInterval: uint16(authInterval * 100), Addrs: []netip.Addr{netip.MustParseAddr("198.18.0.100")}}
	}
	src := netip.MustParseAddr("198.18.0.2")
	wrong, _ := vrrp.NewAuth(vrrp.AuthConfig{Keys: []vrrp.AuthKey{{ID: 1, Secret: bytes.Repeat([]byte{0x99}, 32)}}, ActiveKey: 1, Window: 5 * time.Second})
	right, _ := vrrp.NewAuth(vrrp.AuthConfig{Keys: []vrrp.AuthKey{{ID: 1, Secret: key1}}, ActiveKey: 1, Window: 5 * time.Second})
	before := transitions(a) + transitions(b)
	for range 20 {
		wrongKey, _ := adv(255).MarshalAuth(netip.MustParseAddr("198.18.0.9"), vrrp.GroupIPv4, wrong)
		h.inject(wrongKey, netip.MustParseAddr("198.18.0.9"))
		resign, _ := adv(0).Marshal(src, vrrp.GroupIPv4)
		h.inject(resign, src)
		time.Sleep(20 * time.Millisecond)
	}
	// A real advert from a, captured: b takes it once, and its replay never.
	captured, _ := adv(200).MarshalAuth(src, vrrp.GroupIPv4, right)
	h.inject(captured, src)
	h.inject(captured, src)
	time.Sleep(quietFor) // a resignation would have moved the VIP by now
	if a.role() != "master" || !a.hasVIP() || b.role() != "backup" || b.hasVIP() || transitions(a)+transitions(b) != before {
		t.Fatalf("forged adverts changed the pair: a %s (VIP %v), b %s (VIP %v), transitions %d -> %d",
			a.role(), a.hasVIP(), b.role(), b.hasVIP(), before, transitions(a)+transitions(b))
	}
	for _, d := range []*director{a, b} {
		if dropped(d, "auth_missing") < 20 || dropped(d, "auth_bad_hmac") < 20 {
			t.Errorf("%s dropped %v", d.addr, d.status().Families)
		}
	}
	if dropped(b, "auth_replay") < 1 {
		t.Errorf("b counted no replay: %v", b.status().Families)
	}
	rec := httptest.NewRecorder()
	metrics.New(b.core).Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`ipvsctl_vrrp_adverts_dropped_total{family="ipv4",reason="auth_bad_hmac"} `,
		`ipvsctl_vrrp_adverts_dropped_total{family="ipv4",reason="auth_replay"} 1`, `ipvsctl_vrrp_authenticated{family="ipv4"} 1`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// Rotation, in three revisions on the master, without a transition.
	apply(`{"keys": [{"id": 1, "file": "` + k1 + `"}, {"id": 2, "file": "` + k2 + `"}], "active_key": 1}`)
	eventually(t, 5*time.Second, "both directors accepting keys 1 and 2", func() bool {
		return strings.Contains(a.status().Auth, "(keys 1 2)") && strings.Contains(b.status().Auth, "(keys 1 2)")
	})
	apply(`{"keys": [{"id": 1, "file": "` + k1 + `"}, {"id": 2, "file": "` + k2 + `"}], "active_key": 2}`)
	apply(`{"keys": [{"id": 2, "file": "` + k2 + `"}]}`)
	eventually(t, 5*time.Second, "both directors on key 2 alone", func() bool {
		return strings.Contains(a.status().Auth, "key 2 (keys 2)") && strings.Contains(b.status().Auth, "key 2 (keys 2)")
	})
	time.Sleep(quietFor)
	if a.role() != "master" || b.role() != "backup" || transitions(a)+transitions(b) != before {
		t.Fatalf("the rotation moved the pair: a %s, b %s, transitions %d -> %d", a.role(), b.role(), before, transitions(a)+transitions(b))
	}
	if n := dropped(b, "auth_unknown_key") + dropped(a, "auth_unknown_key"); n != 0 {
		t.Errorf("%d adverts lost to an unknown key during the rotation", n)
	}
	// Key 1 is refused now.
	old, _ := adv(255).MarshalAuth(src, vrrp.GroupIPv4, right)
	h.inject(old, src)
	eventually(t, 2*time.Second, "an advert with the dropped key refused", func() bool { return dropped(b, "auth_unknown_key") == 1 })

	// The keys are nowhere in what the API serves or the store keeps.
	js, _ := json.Marshal(b.status())
	var exp bytes.Buffer
	if err := a.core.Export(ctx, "json", &exp); err != nil {
		t.Fatal(err)
	}
	for _, k := range [][]byte{key1, key2} {
		for what, text := range map[string]string{"status": string(js), "export": exp.String()} {
			if strings.Contains(strings.ToLower(text), fmt.Sprintf("%x", k)) {
				t.Errorf("a key is in the %s", what)
			}
		}
		dbBytes, _ := os.ReadFile(a.db)
		if bytes.Contains(dbBytes, []byte(fmt.Sprintf("%x", k))) || bytes.Contains(dbBytes, k) {
			t.Errorf("a key is in the database file")
		}
	}

	// The keyed pair still fails over.
	a.stop()
	eventually(t, 5*time.Second, "b master with the VIP after a stopped", func() bool { return b.role() == "master" && b.hasVIP() })
}

// A director whose signing key file is missing is in fault (it cannot sign),
// with the file named, and takes part once the file is there.
func TestAuthKeyFileMissingIsAFault(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "k1")
	a := newDirector(t, "198.18.0.2", 200)
	if _, err := a.core.Apply(ctx, admin, strings.NewReader(authState(`{"keys": [{"id": 1, "file": "`+path+`"}]}`)), "state.json",
		server.WriteOptions{NoApply: true}); err != nil {
		t.Fatal(err)
	}
	a.start(&hub{}, quiet())
	eventually(t, 5*time.Second, "a in fault for its missing key", func() bool {
		s := a.status()
		return s != nil && s.Role == "fault" && strings.Contains(s.Fault, path+": no such file") && strings.Contains(s.AuthError, path)
	})
	if a.hasVIP() {
		t.Error("a director that cannot sign holds the VIP")
	}
	// A key file others can read is refused too.
	if err := os.WriteFile(path, []byte(strings.Repeat("k", 32)), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the open key file refused", func() bool {
		s := a.status()
		return s.Role == "fault" && strings.Contains(s.AuthError, "mode 0644")
	})
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a master once its key is readable", func() bool {
		s := a.status()
		return s.Role == "master" && a.hasVIP() && s.AuthError == "" && strings.HasPrefix(s.Auth, "hmac-sha256")
	})
}

// An unauthenticated pair moves to enforce in three revisions on the master
// (receive-only, permissive, enforce) with no transition on either director,
// and back to none the same way round.
func TestPairAuthMigrationWithoutFailover(t *testing.T) {
	ctx := context.Background()
	k1, _ := writeKey(t, t.TempDir(), "k1", 0x33)
	h := &hub{}
	a, b := newDirector(t, "198.18.0.2", 200), newDirector(t, "198.18.0.3", 100)
	unkeyed := authState("null")
	if _, err := a.core.Apply(ctx, admin, strings.NewReader(unkeyed), "state.json", server.WriteOptions{NoApply: true}); err != nil {
		t.Fatal(err)
	}
	a.peerWith(b)
	b.peerWith(a)
	a.start(h, quiet())
	b.start(h, quiet())
	eventually(t, 10*time.Second, "a master with the VIP and b a backup without it", func() bool {
		return a.role() == "master" && a.hasVIP() && b.role() == "backup" && !b.hasVIP()
	})
	before := transitions(a) + transitions(b)
	step := func(doc, want string) {
		t.Helper()
		if _, err := a.core.Apply(ctx, admin, strings.NewReader(doc), "state.json", server.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "both directors at "+want, func() bool {
			return strings.HasPrefix(a.status().Auth, want) && strings.HasPrefix(b.status().Auth, want)
		})
		time.Sleep(quietFor)
	}
	for _, mode := range []string{"receive-only", "permissive", "enforce", "permissive", "receive-only"} {
		step(authState(`{"keys": [{"id": 1, "file": "`+k1+`"}], "mode": "`+mode+`"}`), "hmac-sha256 "+mode)
	}
	step(unkeyed, "none")
	if a.role() != "master" || b.role() != "backup" || transitions(a)+transitions(b) != before {
		t.Fatalf("the migration moved the pair: a %s, b %s, transitions %d -> %d", a.role(), b.role(), before, transitions(a)+transitions(b))
	}
}
