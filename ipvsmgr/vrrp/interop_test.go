package vrrp

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// Interop with keepalived (tier 2: root, fresh namespaces, no ip_vs needed).
// ipvsctl's side runs as a child process (this test binary in helper mode)
// inside its namespace, so that it can be killed with SIGKILL or stopped with
// SIGTERM like the daemon; it adds and removes the VIP with `ip`, and prints
// its transitions. keepalived runs in the other namespace; both are judged by
// keepalived's own log lines and by where the VIP is.

const (
	helperEnv   = "VRRP_INTEROP_HELPER"
	interopVIP  = "198.18.0.100"
	interopAdv  = 200 * time.Millisecond
	interopVRID = 51
)

// TestVRRPHelperProcess is the ipvsctl side; it only runs as a child.
func TestVRRPHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		testenv.OptIn(t, "the ipvsctl side of the keepalived interop tests; runs only as their child process")
	}
	prio, _ := strconv.Atoi(os.Getenv("VRRP_PRIORITY"))
	ifname := os.Getenv("VRRP_IF")
	cfg := ConnConfig{Interface: ifname, VRID: interopVRID}
	if k := os.Getenv("VRRP_AUTH_KEY"); k != "" {
		// keepalived 2.4's auth_hmac, key 1 (keepalived24_test.go).
		secret, err := hex.DecodeString(k)
		if err != nil {
			t.Fatal(err)
		}
		window, _ := time.ParseDuration(os.Getenv("VRRP_AUTH_WINDOW"))
		if cfg.Auth, err = NewAuth(AuthConfig{Keys: []AuthKey{{ID: 1, Secret: secret}}, ActiveKey: 1, Window: window}); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go printDrops(conn)
	ann, err := NewAnnouncer(ifname, true, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ann.Close()
	var mu sync.Mutex
	say := func(tr Transition) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("TRANSITION %s %s\n", tr.To, tr.Reason)
	}
	vip := func(op string) {
		out, err := exec.Command("ip", "addr", op, interopVIP+"/32", "dev", ifname).CombinedOutput()
		if err != nil && op == "add" {
			fmt.Printf("ip addr %s: %v %s\n", op, err, out)
		}
	}
	inst, err := New(Config{VRID: interopVRID, Priority: uint8(prio), AdvertInterval: interopAdv, Preempt: true,
		Addrs: []netip.Addr{netip.MustParseAddr(interopVIP)}, GARPCount: 1},
		Options{Conn: conn, Announcer: ann, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
			OnMaster: func(tr Transition) { vip("add"); say(tr) },
			OnBackup: func(tr Transition) { vip("del"); say(tr) },
			OnFault:  func(tr Transition) { vip("del"); say(tr) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := inst.Run(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Println("STOPPED")
}

// printDrops prints "DROPPED reason=count ..." each time the adverts the
// conn refused change, so that the test reads what this side refused.
func printDrops(c *RawConn) {
	var last ConnStats
	for range time.Tick(20 * time.Millisecond) {
		st := c.Stats()
		if st == last {
			continue
		}
		last = st
		var f []string
		for r, n := range st.ByReason() {
			if n > 0 {
				f = append(f, fmt.Sprintf("%s=%d", r, n))
			}
		}
		slices.Sort(f)
		fmt.Println("DROPPED " + strings.Join(f, " "))
	}
}

// ipvsctlSide is the helper process and what it printed, with when.
type ipvsctlSide struct {
	t    *testing.T
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  []string
	when []time.Time
	done chan struct{}
}

func startIpvsctlSide(t *testing.T, ns, ifname string, priority int, env ...string) *ipvsctlSide {
	t.Helper()
	s := &ipvsctlSide{t: t, done: make(chan struct{})}
	s.cmd = exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestVRRPHelperProcess$", "-test.count=1")
	s.cmd.Env = append(append(os.Environ(), helperEnv+"=1", "VRRP_PRIORITY="+strconv.Itoa(priority), "VRRP_IF="+ifname), env...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	s.cmd.Stderr = &stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.mu.Lock()
			s.out, s.when = append(s.out, sc.Text()), append(s.when, time.Now())
			s.mu.Unlock()
		}
		_ = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.kill(syscall.SIGKILL)
		if t.Failed() {
			t.Logf("ipvsctl side (priority %d) printed:\n%s\nstderr:\n%s", priority, strings.Join(s.lines(), "\n"), stderr.String())
		}
	})
	return s
}

func (s *ipvsctlSide) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.out...)
}

// wait waits for the n-th line (from 1) that starts with prefix and returns
// when it was read.
func (s *ipvsctlSide) wait(prefix string, n int, d time.Duration) time.Time {
	s.t.Helper()
	stop := time.Now().Add(d)
	for time.Now().Before(stop) {
		s.mu.Lock()
		seen := 0
		for i, l := range s.out {
			if strings.HasPrefix(l, prefix) {
				if seen++; seen == n {
					at := s.when[i]
					s.mu.Unlock()
					return at
				}
			}
		}
		s.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
	s.t.Fatalf("ipvsctl side did not print %q (#%d) within %s; printed %q", prefix, n, d, s.lines())
	return time.Time{}
}

func (s *ipvsctlSide) count(prefix string) int {
	n := 0
	for _, l := range s.lines() {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func (s *ipvsctlSide) kill(sig syscall.Signal) {
	select {
	case <-s.done:
		return
	default:
	}
	// `ip netns exec` execs the helper in place: the pid is the helper's.
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func interopKeepalivedConf(priority int) string {
	return keepalivedConf(fmt.Sprintf(`vrrp_instance VI {
  state BACKUP
  interface vrrp0
  virtual_router_id %d
  priority %d
  advert_int %v
  virtual_ipaddress {
    %s/32
  }
}
`, interopVRID, priority, interopAdv.Seconds(), interopVIP))
}

func hasVIP(t *testing.T, ns string) bool {
	return strings.Contains(sh(t, "ip", "-n", ns, "-4", "addr", "show", "dev", "vrrp0"), interopVIP+"/32")
}

// waitVIP waits until the VIP is (or is not) in ns.
func waitVIP(t *testing.T, ns string, want bool, d time.Duration) time.Time {
	t.Helper()
	stop := time.Now().Add(d)
	for time.Now().Before(stop) {
		if hasVIP(t, ns) == want {
			return time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("VIP in %s: want %v, still %v after %s", ns, want, !want, d)
	return time.Time{}
}

// Down intervals at a 200 ms advert interval.
func downInterval(priority int) time.Duration {
	return 3*interopAdv + time.Duration(256-priority)*interopAdv/256
}

func skewTime(priority int) time.Duration {
	return time.Duration(256-priority) * interopAdv / 256
}

const (
	logMaster = "(VI) Entering MASTER STATE"
	logBackup = "(VI) Entering BACKUP STATE"
)

func TestKeepalivedInteropIpvsctlMaster(t *testing.T) {
	requireKeepalived(t)
	a, b := vethPair(t)

	// ipvsctl (200) is master; keepalived (100) joins as backup and stays so.
	ip := startIpvsctlSide(t, a.ns, a.ifname, 200)
	ip.wait("TRANSITION master", 1, 5*time.Second)
	ka := startKeepalived(t, b.ns, interopKeepalivedConf(100))
	if _, err := ka.waitLog(logBackup, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * downInterval(100))
	if ka.countLog(logMaster) != 0 || !hasVIP(t, a.ns) || hasVIP(t, b.ns) {
		t.Fatalf("keepalived took over from a higher-priority ipvsctl (VIP in ipvsctl's ns %v, keepalived's %v)", hasVIP(t, a.ns), hasVIP(t, b.ns))
	}

	// SIGTERM: ipvsctl resigns with priority 0; keepalived takes over after
	// its skew time, not its master down interval.
	stopAt := time.Now()
	ip.kill(syscall.SIGTERM)
	tookOver, err := ka.waitLog(logMaster, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	handover := tookOver.Sub(stopAt)
	t.Logf("SIGTERM -> keepalived MASTER: %s (skew %s, master down interval %s)", handover, skewTime(100), downInterval(100))
	if handover >= downInterval(100) {
		t.Errorf("handover took %s: not the priority-0 path (down interval %s)", handover, downInterval(100))
	}
	waitVIP(t, b.ns, true, 5*time.Second)
	if hasVIP(t, a.ns) {
		t.Error("the resigned ipvsctl kept the VIP")
	}

	// ipvsctl back at 200 preempts keepalived's 100.
	startAt := time.Now()
	ip = startIpvsctlSide(t, a.ns, a.ifname, 200)
	ip.wait("TRANSITION backup", 1, 5*time.Second)
	mastered := ip.wait("TRANSITION master", 1, 10*time.Second)
	if _, err := ka.waitNth(logBackup, 2, 5*time.Second); err != nil {
		t.Fatalf("keepalived did not step back to backup: %v", err)
	}
	t.Logf("ipvsctl restart -> preempted keepalived: %s (its master down interval %s)", mastered.Sub(startAt), downInterval(200))
	waitVIP(t, b.ns, false, 5*time.Second)
	if !hasVIP(t, a.ns) {
		t.Error("the preempting ipvsctl has no VIP")
	}
	if !strings.Contains(ip.lines()[len(ip.lines())-1], "preempting a master of lower priority 100") {
		t.Errorf("reason: %q", ip.lines())
	}

	// kill -9: keepalived takes over after its master down interval.
	killAt := time.Now()
	ip.kill(syscall.SIGKILL)
	tookOver, err = ka.waitNth(logMaster, 2, 10*time.Second)
	if err != nil {
		t.Fatalf("keepalived did not take over from a killed ipvsctl: %v", err)
	}
	took := tookOver.Sub(killAt)
	t.Logf("kill -9 of ipvsctl -> keepalived MASTER: %s (its master down interval %s)", took, downInterval(100))
	if took < downInterval(100)-2*interopAdv {
		t.Errorf("took over in %s, before the master down interval", took)
	}
	waitVIP(t, b.ns, true, 5*time.Second)
}

func TestKeepalivedInteropKeepalivedMaster(t *testing.T) {
	requireKeepalived(t)
	a, b := vethPair(t)

	// keepalived (200) is master; ipvsctl (100) joins as backup and stays so.
	ka := startKeepalived(t, b.ns, interopKeepalivedConf(200))
	if _, err := ka.waitLog(logMaster, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	waitVIP(t, b.ns, true, 5*time.Second)
	ip := startIpvsctlSide(t, a.ns, a.ifname, 100)
	ip.wait("TRANSITION backup", 1, 5*time.Second)
	time.Sleep(5 * downInterval(100))
	if ip.count("TRANSITION master") != 0 || hasVIP(t, a.ns) {
		t.Fatalf("ipvsctl took over from a higher-priority keepalived: %q", ip.lines())
	}

	// keepalived's SIGTERM: its priority-0 advert hands over within ipvsctl's
	// skew time.
	stopAt := time.Now()
	ka.stop(syscall.SIGTERM)
	mastered := ip.wait("TRANSITION master", 1, 5*time.Second)
	t.Logf("keepalived SIGTERM -> ipvsctl MASTER: %s (skew %s, master down interval %s)", mastered.Sub(stopAt), skewTime(100), downInterval(100))
	if !strings.Contains(ip.lines()[len(ip.lines())-1], "the master resigned (priority 0)") {
		t.Errorf("not taken over on the resignation: %q", ip.lines())
	}
	waitVIP(t, a.ns, true, 5*time.Second)

	// keepalived back at 200 preempts ipvsctl.
	ka = startKeepalived(t, b.ns, interopKeepalivedConf(200))
	ip.wait("TRANSITION backup", 2, 10*time.Second)
	if _, err := ka.waitLog(logMaster, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	waitVIP(t, a.ns, false, 5*time.Second)
	waitVIP(t, b.ns, true, 5*time.Second)

	// kill -9 of keepalived's VRRP process: ipvsctl takes over after its
	// master down interval.
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
	took := mastered.Sub(killAt)
	t.Logf("kill -9 of keepalived's VRRP process -> ipvsctl MASTER: %s (master down interval %s)", took, downInterval(100))
	if took < downInterval(100)-2*interopAdv || took > downInterval(100)+time.Second {
		t.Errorf("took over in %s, want about the master down interval %s", took, downInterval(100))
	}
	waitVIP(t, a.ns, true, 5*time.Second)
}
