package health

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/ipvsctl/ipvsctl/internal/regularfile"
	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

func pingSpec(addr string) *ipvsmgr.CheckSpec {
	return &ipvsmgr.CheckSpec{Type: "ping", Target: netip.AddrPortFrom(netip.MustParseAddr(addr), 0), Timeout: time.Second}
}

// An echo to loopback is answered, IPv4 and IPv6, on whichever socket this
// process may open (a ping socket by net.ipv4.ping_group_range, or raw).
func TestPingCheckLoopback(t *testing.T) {
	if c, _, err := listenICMP(false); err != nil {
		testenv.Needf(t, "no ICMP socket here (ping_group_range excludes our group and no CAP_NET_RAW): %v", err)
	} else {
		c.Close()
	}
	var ck Checker
	for _, a := range []string{"127.0.0.1", "::1"} {
		if r := ck.Run(context.Background(), pingSpec(a)); r.Outcome != Pass || r.Reason != "echo reply" {
			t.Errorf("ping %s: %+v", a, r)
		}
	}
}

// Through a router in namespaces the test makes: a host that answers
// passes; one behind a blackhole fails at the timeout, one behind an
// unreachable route fails; on a raw socket (a fresh namespace's
// ping_group_range allows no group) and on a ping socket (allowed).
func TestPingCheckNetns(t *testing.T) {
	director, _ := netnsPair(t)
	cases := []struct {
		addr string
		want Outcome
	}{{"198.18.98.2", Pass}, {"2001:db8:98::2", Pass}, {"198.18.99.1", Fail}, {"198.18.97.1", Fail}, {"2001:db8:99::1", Fail}}
	run := func(wantUnprivileged bool) {
		t.Helper()
		inNetns(t, director, func() {
			c, unpriv, err := listenICMP(false)
			if err != nil {
				t.Fatalf("ICMP socket in the namespace: %v", err)
			}
			c.Close()
			if unpriv != wantUnprivileged {
				t.Fatalf("unprivileged socket %v, want %v", unpriv, wantUnprivileged)
			}
			var ck Checker
			for _, c := range cases {
				spec := pingSpec(c.addr)
				spec.Timeout = 700 * time.Millisecond
				start := time.Now()
				r := ck.Run(context.Background(), spec)
				if r.Outcome != c.want {
					t.Errorf("ping %s (unprivileged %v): %+v, want %v", c.addr, wantUnprivileged, r, c.want)
				}
				if c.want == Fail && r.Reason == "" || time.Since(start) > 2*time.Second {
					t.Errorf("ping %s: %+v after %v", c.addr, r, time.Since(start))
				}
			}
		})
	}
	run(false)
	if out, err := exec.Command("ip", "netns", "exec", nsName(t, director), "sysctl", "-qw", "net.ipv4.ping_group_range=0 2147483647").CombinedOutput(); err != nil {
		t.Fatalf("ping_group_range: %v: %s", err, out)
	}
	run(true)
}

// nsName finds the name `ip netns` knows a namespace handle by.
func nsName(t *testing.T, h netns.NsHandle) string {
	t.Helper()
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		o, err := netns.GetFromName(e.Name())
		if err == nil {
			same := o.Equal(h)
			o.Close()
			if same {
				return e.Name()
			}
		}
	}
	t.Fatal("namespace not found in /run/netns")
	return ""
}

func TestStrtolAsKeepalived(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "7\n": 7, "  -12abc": -12, "+3": 3, "0x1f": 31, "010": 8, "09": 0, "abc": 0,
		"2147483647": 2147483647, "-2147483648": -2147483648, "0x": 0} {
		if got, ok := strtol(in); !ok || got != want {
			t.Errorf("strtol(%q) = %d %v, want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"2147483648", "99999999999999999999", "-2147483649"} {
		if _, ok := strtol(in); ok {
			t.Errorf("strtol(%q) took a number outside the int range", in)
		}
	}
}

// A file check through the runner, with the real checker: the number in
// the file times file_weight moves the server's weight (never below 0); at
// -65535 or below it is down; with file_weight 0 any non-zero number is
// down; a missing file reads 0.
func TestFileCheckWeights(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r1.weight")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	doc := func(factor int, reverse bool) string {
		return `{"services":[{"name":"web","address":"198.18.0.100","port":80,
		 "check":{"type":"file","file":` + strconv.Quote(path) + `,"file_weight":` + strconv.Itoa(factor) + `,"file_reverse":` + strconv.FormatBool(reverse) + `,"interval":1,"rise":1,"fall":1},
		 "servers":[{"name":"r1","address":"198.18.0.11","weight":8}]}]}`
	}
	d := compile(t, doc(2, false))
	var ck Checker
	h := newHarnessWith(t, d, ck.Run)
	view := func() ipvsmgr.ServerHealth { return h.r.View().Servers[d.Checks[0].Ref] }
	weight := func(s ipvsmgr.ServerHealth) int {
		if s.WeightSet {
			return int(s.Weight)
		}
		return 8
	}
	for _, c := range []struct {
		content string
		state   ipvsmgr.HealthState
		weight  int
	}{{"3\n", ipvsmgr.HealthUp, 14}, {"-1", ipvsmgr.HealthUp, 6}, {"-9", ipvsmgr.HealthUp, 0}, {"-40000", ipvsmgr.HealthDown, 0}, {"0", ipvsmgr.HealthUp, 8}} {
		write(c.content)
		h.step(time.Second, 1)
		if s := view(); s.State != c.state || c.state == ipvsmgr.HealthUp && weight(s) != c.weight {
			t.Errorf("file %q, file_weight 2: %+v, want %v weight %d", c.content, s, c.state, c.weight)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	h.step(time.Second, 1)
	if s := view(); s.State != ipvsmgr.HealthUp || weight(s) != 8 {
		t.Errorf("missing file: %+v", s)
	}

	// file_weight 0: a status, not a weight; reverse turns it round.
	for _, c := range []struct {
		reverse bool
		content string
		want    Outcome
	}{{false, "0", Pass}, {false, "1", Fail}, {true, "0", Fail}, {true, "5", Pass}} {
		write(c.content)
		spec := &ipvsmgr.CheckSpec{Type: "file", File: path, FileWeight: 0, FileReverse: c.reverse, Timeout: time.Second}
		if r := ck.Run(context.Background(), spec); r.Outcome != c.want || r.Delta != 0 {
			t.Errorf("file_weight 0, reverse %v, %q: %+v, want %v", c.reverse, c.content, r, c.want)
		}
	}
	write("99999999999")
	if r := ck.Run(context.Background(), &ipvsmgr.CheckSpec{Type: "file", File: path, FileWeight: 1, Timeout: time.Second}); r.Outcome != Fault {
		t.Errorf("a number outside int: %+v, want a fault (keepalived keeps the last status)", r)
	}
}

// warmup bounds the random delay of a new server's first check
// (keepalived's warmup): 0 checks at once, 5 within 5 s, though the
// interval is ten minutes (without a warmup the first check comes anywhere
// in the first interval).
func TestWarmupBoundsTheFirstCheck(t *testing.T) {
	for _, warmup := range []float64{0, 5} {
		d := compile(t, `{"services":[{"name":"web","address":"198.18.0.100","port":80,
		 "check":{"type":"tcp","interval":600,"rise":1,"fall":1,"warmup":`+strconv.FormatFloat(warmup, 'f', -1, 64)+`},
		 "servers":[{"name":"r1","address":"198.18.0.11"}]}]}`)
		h := newHarness(t, d)
		h.step(time.Duration(warmup*float64(time.Second))+maxSlack+time.Millisecond, 1)
		if s := h.r.View().Servers[d.Checks[0].Ref]; s.State != ipvsmgr.HealthUp {
			t.Errorf("warmup %v: after the warmup the server is %v", warmup, s.State)
		}
	}
}

// A file check whose file is a FIFO with no writer (a plain open of it
// blocks forever, and the check with it) is a fault at once, naming the
// file: found by an open that does not block. The wait below only turns a
// hang into a failure.
func TestFileCheckOfAFIFOIsAFault(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "r1.weight")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	var ck Checker
	done := make(chan Result, 1)
	go func() {
		done <- ck.Run(context.Background(), &ipvsmgr.CheckSpec{Type: "file", File: fifo, FileWeight: 1, Timeout: time.Second})
	}()
	select {
	case r := <-done:
		if r.Outcome != Fault || !strings.Contains(r.Reason, "not a regular file") || !strings.Contains(r.Reason, "FIFO") {
			t.Fatalf("file check of a FIFO: %+v, want a fault saying it is not a regular file", r)
		}
	case <-time.After(5 * regularfile.Timeout):
		t.Fatal("the file check of a FIFO is still blocked in open")
	}
}
