//go:build vmtest

package vmtest

import (
	"bytes"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/vrrp"
)

const forgerAddr = "198.18.0.66"

// authPairDoc is pairDoc (interval 1 s, preempt, no sync daemon) with
// settings.redundancy.auth ("" for none).
func authPairDoc(auth string) string {
	doc := pairDoc(1, true, 0, false, 1)
	if auth == "" {
		return doc
	}
	return strings.Replace(doc, `"sync_daemon":false}`, `"sync_daemon":false,"auth":`+auth+`}`, 1)
}

// redView is the part of `node show --json` this test reads.
type redView struct {
	Redundancy struct {
		Role             string         `json:"role"`
		Auth             string         `json:"auth"`
		TransitionCounts map[string]int `json:"transition_counts"`
		Families         []struct {
			Dropped map[string]uint64 `json:"dropped_adverts"`
		} `json:"families"`
	} `json:"redundancy"`
}

func viewOf(t *testing.T, l *lab) redView {
	t.Helper()
	var v redView
	out, err := l.ipvsctl("node", "show", "--json")
	if err == nil {
		err = json.Unmarshal([]byte(out), &v)
	}
	if err != nil {
		t.Logf("node show --json in %s: %v %s", l.dir, err, out)
	}
	return v
}

func (v redView) transitions() int {
	n := 0
	for _, c := range v.Redundancy.TransitionCounts {
		n += c
	}
	return n
}

func (v redView) dropped(reason string) uint64 {
	var n uint64
	for _, f := range v.Redundancy.Families {
		n += f.Dropped[reason]
	}
	return n
}

// forger is a host on the pair's link: its own namespace on the bridge,
// sending VRRP packets it builds whole (IP_HDRINCL), from any source.
type forger struct {
	t  *testing.T
	ns string
}

func (p *pair) newForger() *forger {
	t := p.t
	ns := p.net.id + "fg"
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	host := "v" + ns + "eth0"
	run(t, "ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns)
	run(t, "ip", "link", "set", host, "netns", p.sw)
	p.net.ns(p.sw, "ip link set "+host+" master br0 up")
	p.net.ns(ns, "ip link set lo up")
	p.net.ns(ns, "ip addr add "+forgerAddr+"/24 dev eth0")
	p.net.ns(ns, "ip link set eth0 up")
	return &forger{t: t, ns: ns}
}

// send sends the packets that pkts makes for each round (VRRP payloads by
// their claimed source) to 224.0.0.18 with TTL 255, rounds times, every gap.
func (f *forger) send(rounds int, gap time.Duration, pkts func() map[netip.Addr][][]byte) {
	f.t.Helper()
	inNS(f.t, f.ns, func() {
		pc, err := net.ListenPacket("ip4:112", "0.0.0.0")
		if err != nil {
			f.t.Fatal(err)
		}
		defer pc.Close()
		rc, err := ipv4.NewRawConn(pc)
		if err != nil {
			f.t.Fatal(err)
		}
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			f.t.Fatal(err)
		}
		if err := rc.SetMulticastInterface(ifi); err != nil {
			f.t.Fatal(err)
		}
		for range rounds {
			for src, list := range pkts() {
				for _, b := range list {
					h := &ipv4.Header{Version: 4, Len: ipv4.HeaderLen, TOS: 0xc0, TotalLen: ipv4.HeaderLen + len(b), TTL: 255,
						Protocol: vrrp.Protocol, Src: src.AsSlice(), Dst: vrrp.GroupIPv4.AsSlice()}
					if err := rc.WriteTo(h, b, nil); err != nil {
						f.t.Fatalf("forge from %s: %v", src, err)
					}
				}
			}
			time.Sleep(gap)
		}
	})
}

func advert(prio uint8) *vrrp.Advert {
	return &vrrp.Advert{VRID: 51, Priority: prio, MaxAdvertInterval: 100, Addrs: []netip.Addr{netip.MustParseAddr(vip)}}
}

// TestRedundancyAuthForgedAdverts: a host on the pair's link forges VRRP
// adverts (the right VRID; priority 255 from itself, priority 0 from the
// master's address; without a trailer or signed with a wrong key). Against
// the unauthenticated pair a spoofed priority 0 makes the backup take over
// (the attack works); with settings.redundancy.auth (HMAC-SHA256, a key
// file on each director) the same forgeries change nothing: the master
// stays master with the VIP, no transition on either director, and each
// counts the drops by reason. Then the keyed pair still fails over when the
// master dies.
func TestRedundancyAuthForgedAdverts(t *testing.T) {
	p := newPair(t, 2)
	A, B := p.a, p.b
	p.nodes(200, 100)
	f := p.newForger()
	keyFile := filepath.Join(t.TempDir(), "vrrp-1.key")
	if err := os.WriteFile(keyFile, []byte("hex:"+strings.Repeat("5a", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dA, dB := p.director(A, addrA), p.director(B, addrB)
	dA.start()
	dB.start()
	A.apply(authPairDoc(""))
	settled := func(what string) {
		t.Helper()
		waitFor(t, what, 40*time.Second, func() bool {
			return roleOf(A) == "master" && hasVIP(t, A) && roleOf(B) == "backup" && !hasVIP(t, B)
		})
	}
	settled("A master with the VIP, B backup without it (unauthenticated)")
	if v := viewOf(t, B); v.Redundancy.Auth != "none" {
		t.Errorf("B's adverts are %q, want none", v.Redundancy.Auth)
	}

	master := netip.MustParseAddr(addrA)
	self := netip.MustParseAddr(forgerAddr)
	resign, err := advert(0).Marshal(master, vrrp.GroupIPv4)
	if err != nil {
		t.Fatal(err)
	}
	// The attack works on the unauthenticated pair: B takes over.
	before := viewOf(t, B).Redundancy.TransitionCounts["master"]
	// A priority 0 sets B's master-down timer to its skew time (156/256 s);
	// A's own next advert (every second) puts it back to 3.6 s. One forgery
	// wins when it lands more than the skew time before A's next advert, about
	// two times in five: the attacker (and the test) tries again until it does.
	took := false
	for try := 0; try < 15 && !took; try++ {
		f.send(1, 0, func() map[netip.Addr][][]byte { return map[netip.Addr][][]byte{master: {resign}} })
		time.Sleep(900 * time.Millisecond)
		took = viewOf(t, B).Redundancy.TransitionCounts["master"] > before
	}
	if !took {
		t.Fatal("15 forged priority-0 adverts from A's address never made the unauthenticated B master")
	}
	t.Logf("unauthenticated: a forged priority-0 advert from %s's address made B master", addrA)
	settled("A master again (preempt)")

	// The same pair, keyed: A's revision reaches B by replication.
	A.apply(authPairDoc(`{"keys":[{"id":1,"file":"` + keyFile + `"}]}`))
	waitFor(t, "both directors signing with key 1", 20*time.Second, func() bool {
		return strings.HasPrefix(viewOf(t, A).Redundancy.Auth, "hmac-sha256 enforce, key 1") &&
			strings.HasPrefix(viewOf(t, B).Redundancy.Auth, "hmac-sha256 enforce, key 1")
	})
	settled("A master with the VIP, B backup without it (keyed)")
	wrong, err := vrrp.NewAuth(vrrp.AuthConfig{Keys: []vrrp.AuthKey{{ID: 1, Secret: bytes.Repeat([]byte{0xa5}, 32)}}, ActiveKey: 1,
		Window: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	take, _ := advert(255).Marshal(self, vrrp.GroupIPv4)
	vA, vB := viewOf(t, A), viewOf(t, B)
	const rounds = 40 // 4 s: more than B's master-down interval (3.6 s), far more than its skew after a resignation (0.6 s)
	f.send(rounds, 100*time.Millisecond, func() map[netip.Addr][][]byte {
		// Signed afresh each round (a current time stamp): refused for the HMAC, not as stale.
		takeSigned, _ := advert(255).MarshalAuth(self, vrrp.GroupIPv4, wrong)
		resignSigned, _ := advert(0).MarshalAuth(master, vrrp.GroupIPv4, wrong)
		return map[netip.Addr][][]byte{self: {take, takeSigned}, master: {resign, resignSigned}}
	})
	time.Sleep(time.Second)
	wA, wB := viewOf(t, A), viewOf(t, B)
	if wA.transitions() != vA.transitions() || wB.transitions() != vB.transitions() {
		t.Errorf("forged adverts made transitions: A %v -> %v, B %v -> %v", vA.Redundancy.TransitionCounts, wA.Redundancy.TransitionCounts,
			vB.Redundancy.TransitionCounts, wB.Redundancy.TransitionCounts)
	}
	if roleOf(A) != "master" || !hasVIP(t, A) || roleOf(B) != "backup" || hasVIP(t, B) {
		t.Fatalf("after the forgeries: A %s (VIP %v), B %s (VIP %v)", roleOf(A), hasVIP(t, A), roleOf(B), hasVIP(t, B))
	}
	// B gets all four kinds; A's kernel drops those claiming A's own address
	// (a martian source) before VRRP sees them, so A counts the forger's own.
	for _, c := range []struct {
		name string
		w    redView
		n    uint64
	}{{"A", wA, rounds}, {"B", wB, 2 * rounds}} {
		if c.w.dropped("auth_missing") < c.n || c.w.dropped("auth_bad_hmac") < c.n {
			t.Errorf("%s counted %v dropped, want at least %d without a trailer and %d with a bad HMAC", c.name, c.w.Redundancy.Families, c.n, c.n)
		}
	}
	t.Logf("keyed: %d forged adverts changed nothing; B dropped %v", 4*rounds, wB.Redundancy.Families)
	t.Logf("B's node show:\n%s", B.cmdOut("node", "show"))

	// The keyed pair fails over when the master dies.
	killed := time.Now()
	dA.stop(syscall.SIGKILL)
	p.link(A, false)
	waitFor(t, "B master with the VIP", 30*time.Second, func() bool { return roleOf(B) == "master" && hasVIP(t, B) })
	t.Logf("keyed pair: A killed -> B master with the VIP in %s", time.Since(killed).Round(time.Millisecond))
	waitFor(t, "HTTP through the VIP by way of B", 20*time.Second, func() bool {
		c, err := A.dial(vip + ":80")
		if err != nil {
			return false
		}
		defer c.Close()
		_, err = ask(c)
		return err == nil
	})
}
