package vrrp

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// keepalived 2.4's auth_hmac against a running keepalived that signs:
// Debian's 2.2.7 has no auth_hmac, and its source cannot reach a fresh CI
// machine (no registry serves it), so these run when IPVSCTL_KEEPALIVED24
// names a keepalived 2.4.2+ binary built from its source (docs/pair.md says
// how). Both sides share key 1 and a 30 s freshness window, so that a
// replay within it is refused by the sequence check, not the clock.

const ka24Window = 30 * time.Second

func keepalived24(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("IPVSCTL_KEEPALIVED24")
	if bin == "" {
		testenv.OptIn(t, "set IPVSCTL_KEEPALIVED24 to a keepalived 2.4.2+ binary built from its source")
	}
	requireRoot(t)
	out, _ := exec.Command(bin, "--version").CombinedOutput()
	var major, minor, patch int
	if _, err := fmt.Sscanf(string(out), "Keepalived v%d.%d.%d", &major, &minor, &patch); err != nil ||
		major != 2 || minor < 4 || minor == 4 && patch < 2 {
		t.Fatalf("%s is not keepalived 2.4.2 or later (the auth_hmac image ipvsctl writes): %q", bin, out)
	}
	t.Logf("peer: %s", strings.SplitN(string(out), "\n", 2)[0])
	return bin
}

func ka24Conf(priority int) string {
	return keepalivedConf(fmt.Sprintf(`vrrp_instance VI {
  state BACKUP
  interface vrrp0
  virtual_router_id %d
  priority %d
  advert_int %v
  auth_hmac {
    key 1 hex:%s
    active_key 1
    time_window %d
  }
  virtual_ipaddress {
    %s/32
  }
}
`, interopVRID, priority, interopAdv.Seconds(), hex.EncodeToString(kaKey()), int(ka24Window/time.Second), interopVIP))
}

func ka24Side(t *testing.T, l link, priority int) *ipvsctlSide {
	return startIpvsctlSide(t, l.ns, l.ifname, priority, "VRRP_AUTH_KEY="+hex.EncodeToString(kaKey()),
		"VRRP_AUTH_WINDOW="+ka24Window.String())
}

// dropped is the count the ipvsctl side last printed for reason.
func (s *ipvsctlSide) dropped(reason string) int {
	lines := s.lines()
	for i := len(lines) - 1; i >= 0; i-- {
		if f, ok := strings.CutPrefix(lines[i], "DROPPED"); ok {
			for _, kv := range strings.Fields(f) {
				if k, v, _ := strings.Cut(kv, "="); k == reason {
					n, _ := strconv.Atoi(v)
					return n
				}
			}
			return 0
		}
	}
	return 0
}

// adverts records the VRRP adverts that reach ns from src, as the wire
// carried them (advert and trailer), to replay one later.
type adverts struct {
	mu   sync.Mutex
	pdus [][]byte
	pc   *ipv4.PacketConn
}

func recordAdverts(t *testing.T, ns string, src netip.Addr) *adverts {
	t.Helper()
	r := &adverts{}
	err := inNetns(ns, func() error {
		l, err := net.ListenPacket("ip4:112", "0.0.0.0")
		if err != nil {
			return err
		}
		r.pc = ipv4.NewPacketConn(l)
		ifi, err := net.InterfaceByName("vrrp0")
		if err != nil {
			return err
		}
		return r.pc.JoinGroup(ifi, &net.IPAddr{IP: GroupIPv4.AsSlice()})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, _, from, err := r.pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if from.(*net.IPAddr).IP.String() == src.String() {
				r.mu.Lock()
				r.pdus = append(r.pdus, bytes.Clone(buf[:n]))
				r.mu.Unlock()
			}
		}
	}()
	return r
}

// last returns the newest recorded advert with the given priority.
func (r *adverts) last(t *testing.T, priority byte) []byte {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.pdus) - 1; i >= 0; i-- {
		if p := r.pdus[i]; len(p) > 3 && p[2] == priority {
			if len(p) < TrailerLen+8 {
				t.Fatalf("the recorded advert has no auth_hmac trailer: %x", p)
			}
			return p
		}
	}
	t.Fatalf("no advert of priority %d recorded among %d", priority, len(r.pdus))
	return nil
}

// sendRaw sends pdu (an advert with its trailer, as recorded) from src in ns
// to the VRRP group, with TTL 255: a replay, byte for byte.
func sendRaw(t *testing.T, ns string, src netip.Addr, pdu []byte, times int) {
	t.Helper()
	err := inNetns(ns, func() error {
		pc, err := net.ListenPacket("ip4:112", src.String())
		if err != nil {
			return err
		}
		defer pc.Close()
		p := ipv4.NewPacketConn(pc)
		if err := p.SetMulticastTTL(255); err != nil {
			return err
		}
		// On the wire only, as another host would: not back to the namespace's own daemon.
		if err := p.SetMulticastLoopback(false); err != nil {
			return err
		}
		for range times {
			if _, err := p.WriteTo(pdu, nil, &net.IPAddr{IP: GroupIPv4.AsSlice()}); err != nil {
				return err
			}
			time.Sleep(interopAdv / 2)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// forge sends priority-0 adverts (a master's resignation) from src in ns,
// signed with a key the pair does not share.
func forge(t *testing.T, l link, src netip.Addr, times int) {
	t.Helper()
	au, err := NewAuth(AuthConfig{Keys: []AuthKey{{ID: 1, Secret: bytes.Repeat([]byte{7}, 32)}}, ActiveKey: 1, Window: ka24Window})
	if err != nil {
		t.Fatal(err)
	}
	c := listenIn(t, l.ns, ConnConfig{Interface: l.ifname, VRID: interopVRID, Primary: src, Auth: au})
	defer c.Close()
	for range times {
		if err := c.Send(&Advert{VRID: interopVRID, Priority: 0, MaxAdvertInterval: uint16(interopAdv / (10 * time.Millisecond)),
			Addrs: []netip.Addr{netip.MustParseAddr(interopVIP)}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(interopAdv / 2)
	}
}

// ipvsctl (200) and keepalived 2.4 (100) with auth_hmac: an election from
// both backups, a forged resignation and a replayed one refused by
// keepalived, a signed SIGTERM handed over, a preemption back, and a
// takeover after kill -9.
func TestKeepalived24HMACIpvsctlMaster(t *testing.T) {
	bin := keepalived24(t)
	a, b := vethPair(t)
	srcA := netip.MustParseAddr(a.v4)
	rec := recordAdverts(t, b.ns, srcA)

	// The election: both start as backup at once; the higher priority wins.
	ka := startKeepalivedBin(t, bin, b.ns, ka24Conf(100))
	ip := ka24Side(t, a, 200)
	ip.wait("TRANSITION master", 1, 10*time.Second)
	waitVIP(t, a.ns, true, 5*time.Second)
	time.Sleep(5 * downInterval(100))
	if ka.countLog(logMaster) > 1 || ka.countLog(logBackup) == 0 {
		t.Fatalf("keepalived did not settle as backup under a signing ipvsctl:\n%s", ka.logText())
	}
	masters := ka.countLog(logMaster)
	if n := ka.countLog("authentication"); n != 0 {
		t.Fatalf("keepalived refused ipvsctl's signed adverts:\n%s", ka.logText())
	}

	// A forged resignation (wrong key) from ipvsctl's address: refused.
	forge(t, a, srcA, 10)
	time.Sleep(3 * downInterval(100))
	if ka.countLog(logMaster) != masters {
		t.Fatalf("keepalived took a forged resignation:\n%s", ka.logText())
	}
	if _, err := ka.waitLog("invalid authentication HMAC from "+a.v4, 5*time.Second); err != nil {
		t.Fatal(err)
	}

	// SIGTERM: ipvsctl's signed priority-0 advert hands over at once.
	stopAt := time.Now()
	ip.kill(syscall.SIGTERM)
	tookOver, err := ka.waitNth(logMaster, masters+1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("signed SIGTERM -> keepalived MASTER: %s (skew %s, down interval %s)", tookOver.Sub(stopAt), skewTime(100), downInterval(100))
	if tookOver.Sub(stopAt) >= downInterval(100) {
		t.Errorf("handover took %s: keepalived did not take the signed resignation", tookOver.Sub(stopAt))
	}
	waitVIP(t, b.ns, true, 5*time.Second)
	resignation := rec.last(t, 0)

	// ipvsctl back at 200 preempts: keepalived accepts its new signed adverts.
	ip = ka24Side(t, a, 200)
	ip.wait("TRANSITION master", 1, 10*time.Second)
	if _, err := ka.waitNth(logBackup, 2, 5*time.Second); err != nil {
		t.Fatalf("keepalived did not step back to backup: %v\n%s", err, ka.logText())
	}
	waitVIP(t, b.ns, false, 5*time.Second)
	masters = ka.countLog(logMaster)

	// The recorded resignation, replayed byte for byte within the window: refused.
	sendRaw(t, a.ns, srcA, resignation, 10)
	time.Sleep(3 * downInterval(100))
	if ka.countLog(logMaster) != masters || !hasVIP(t, a.ns) {
		t.Fatalf("keepalived took a replayed resignation:\n%s", ka.logText())
	}
	if _, err := ka.waitLog("replayed authentication trailer from "+a.v4, 5*time.Second); err != nil {
		t.Fatal(err)
	}

	// kill -9: the signed adverts stop; keepalived takes over after its down interval.
	killAt := time.Now()
	ip.kill(syscall.SIGKILL)
	tookOver, err = ka.waitNth(logMaster, masters+1, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kill -9 of ipvsctl -> keepalived MASTER: %s (down interval %s)", tookOver.Sub(killAt), downInterval(100))
	waitVIP(t, b.ns, true, 5*time.Second)
}

// keepalived 2.4 (200) and ipvsctl (100) with auth_hmac: ipvsctl stays
// backup on keepalived's signed adverts, refuses a forged and a replayed
// resignation (counted by reason), takes over on keepalived's signed
// SIGTERM, is preempted back, and takes over after kill -9.
func TestKeepalived24HMACKeepalivedMaster(t *testing.T) {
	bin := keepalived24(t)
	a, b := vethPair(t)
	srcB := netip.MustParseAddr(b.v4)
	rec := recordAdverts(t, a.ns, srcB)

	ka := startKeepalivedBin(t, bin, b.ns, ka24Conf(200))
	ip := ka24Side(t, a, 100)
	if _, err := ka.waitLog(logMaster, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ip.wait("TRANSITION backup", 1, 5*time.Second)
	time.Sleep(5 * downInterval(100))
	if n := ip.count("TRANSITION master"); n != 0 || hasVIP(t, a.ns) {
		t.Fatalf("ipvsctl took over from a signing keepalived of higher priority: %q", ip.lines())
	}
	for _, r := range []string{"auth_missing", "auth_bad_hmac", "auth_malformed", "auth_unknown_key", "auth_stale", "auth_replay"} {
		if n := ip.dropped(r); n != 0 {
			t.Fatalf("ipvsctl refused keepalived's signed adverts (%s=%d): %q", r, n, ip.lines())
		}
	}

	// A forged resignation from keepalived's address: refused and counted.
	forge(t, b, srcB, 10)
	time.Sleep(3 * downInterval(100))
	if n := ip.count("TRANSITION master"); n != 0 {
		t.Fatalf("ipvsctl took a forged resignation: %q", ip.lines())
	}
	if n := ip.dropped("auth_bad_hmac"); n == 0 {
		t.Fatalf("the forged adverts were not counted as a bad HMAC: %q", ip.lines())
	}

	// keepalived's SIGTERM: its signed priority-0 advert hands over.
	stopAt := time.Now()
	ka.stop(syscall.SIGTERM)
	mastered := ip.wait("TRANSITION master", 1, 5*time.Second)
	t.Logf("keepalived signed SIGTERM -> ipvsctl MASTER: %s (skew %s, down interval %s)", mastered.Sub(stopAt), skewTime(100), downInterval(100))
	if !strings.Contains(strings.Join(ip.lines(), "\n"), "the master resigned (priority 0)") {
		t.Errorf("not taken over on the signed resignation: %q", ip.lines())
	}
	waitVIP(t, a.ns, true, 5*time.Second)
	resignation := rec.last(t, 0)

	// keepalived back at 200 preempts ipvsctl.
	ka = startKeepalivedBin(t, bin, b.ns, ka24Conf(200))
	ip.wait("TRANSITION backup", 2, 10*time.Second)
	waitVIP(t, a.ns, false, 5*time.Second)
	waitVIP(t, b.ns, true, 5*time.Second)

	// keepalived's recorded resignation, replayed: refused as a replay.
	sendRaw(t, b.ns, srcB, resignation, 10)
	time.Sleep(3 * downInterval(100))
	if n := ip.count("TRANSITION master"); n != 1 {
		t.Fatalf("ipvsctl took a replayed resignation: %q", ip.lines())
	}
	if n := ip.dropped("auth_replay"); n == 0 {
		t.Fatalf("the replayed adverts were not counted as replays: %q", ip.lines())
	}

	// kill -9 of keepalived's VRRP process: ipvsctl takes over after its down interval.
	pid, err := os.ReadFile(ka.vrrpPidFile)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
	killAt := time.Now()
	if err := syscall.Kill(n, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	mastered = ip.wait("TRANSITION master", 2, 10*time.Second)
	t.Logf("kill -9 of keepalived -> ipvsctl MASTER: %s (down interval %s)", mastered.Sub(killAt), downInterval(100))
	waitVIP(t, a.ns, true, 5*time.Second)
}
