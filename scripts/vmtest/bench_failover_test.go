//go:build vmtest

package vmtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// contender is one director pair of the failover benchmark: A (priority
// 200) and B (priority 100) carrying the VIP over DR real servers.
type contender interface {
	startA()
	killA() // SIGKILL
}

// TestBenchFailover is scripts/bench-failover.sh: the failover time (master
// killed with SIGKILL and its link cut -> the first HTTP request answered
// through the VIP, by the backup) of an ipvsctl pair and a keepalived pair,
// at advert intervals of 1 s and 100 ms, the median of a few runs each.
// Skipped unless IPVSCTL_BENCH_FAILOVER=REPS.
func TestBenchFailover(t *testing.T) {
	reps, _ := strconv.Atoi(os.Getenv("IPVSCTL_BENCH_FAILOVER"))
	if reps <= 0 {
		testenv.OptIn(t, "IPVSCTL_BENCH_FAILOVER=REPS runs it (scripts/bench-failover.sh)")
	}
	type row struct {
		interval float64
		who      string
		runs     []time.Duration
	}
	var rows []row
	intervals := []float64{1, 0.1}
	if v := os.Getenv("IPVSCTL_BENCH_INTERVALS"); v != "" {
		intervals = nil
		for _, f := range strings.Split(v, ",") {
			x, err := strconv.ParseFloat(f, 64)
			if err != nil || x <= 0 {
				t.Fatalf("IPVSCTL_BENCH_INTERVALS=%s: %q is not an interval in seconds", v, f)
			}
			intervals = append(intervals, x)
		}
	}
	for _, interval := range intervals {
		for _, who := range []string{"ipvsctl", "keepalived"} {
			runs := benchPair(t, who, interval, reps)
			rows = append(rows, row{interval, who, runs})
		}
	}
	fmt.Printf("\nfailover: master SIGKILLed and its link cut -> first HTTP answer through the VIP (new connection every 10 ms,\n")
	lock := "default (1 s)"
	if v := os.Getenv("IPVSCTL_BENCH_LOCKTIME"); v != "" {
		lock = v + " centiseconds"
	}
	fmt.Printf("200 ms connect timeout), backup priority 100, client's ARP locktime %s, median of %d (runs in order)\n", lock, reps)
	fmt.Printf("%-8s %-11s %9s   %s\n", "advert", "pair", "median", "runs")
	for _, r := range rows {
		s := slices.Clone(r.runs)
		slices.Sort(s)
		var each []string
		for _, d := range r.runs {
			each = append(each, fmt.Sprintf("%.3f", d.Seconds()))
		}
		adv := fmt.Sprintf("%gs", r.interval)
		if r.interval < 1 {
			adv = fmt.Sprintf("%gms", r.interval*1000)
		}
		fmt.Printf("%-8s %-11s %8.3fs   %s\n", adv, r.who, s[len(s)/2].Seconds(), strings.Join(each, " "))
	}
}

// benchPair builds a fresh pair, runs reps failovers and gives each one's time.
func benchPair(t *testing.T, who string, interval float64, reps int) []time.Duration {
	p := newPair(t, 2)
	A, B := p.a, p.b
	if os.Getenv("IPVSCTL_BENCH_LOCKTIME") != "" {
		// The client's ARP cache ignores a gratuitous ARP for an entry
		// updated less than locktime ago (default 1 s): with traffic to the
		// old master just before it died, that, not the directors, can
		// decide when the client follows the VIP to the backup.
		p.net.ns(p.net.cli, "sysctl -qw net.ipv4.neigh.eth0.locktime="+os.Getenv("IPVSCTL_BENCH_LOCKTIME"))
	}
	var c contender
	var dB *director
	var pidsB func() []int // B's VRRP processes, for the trace
	switch who {
	case "ipvsctl":
		p.nodes(200, 100)
		var dA *director
		dA, dB = p.director(A, addrA), p.director(B, addrB)
		dA.start()
		dB.start()
		A.apply(pairDoc(interval, true, 0, false, 1))
		c = ipvsctlContender{dA}
		pidsB = func() []int { return []int{dB.cmd.Process.Pid} }
	default:
		// keepalived moves the VIP (VRRP only); the same LVS DR table is
		// loaded on both directors with ipvsadm, as ipvsctl's backup has it.
		for _, d := range []*lab{A, B} {
			d.ns(d.dir, "ipvsadm -A -t "+vip+":80 -s rr")
			d.ns(d.dir, "ipvsadm -a -t "+vip+":80 -r 198.18.0.11:80 -g -w 1")
			d.ns(d.dir, "ipvsadm -a -t "+vip+":80 -r 198.18.0.12:80 -g -w 1")
		}
		kA := &kaDirector{l: A, prio: 200, interval: interval}
		kB := &kaDirector{l: B, prio: 100, interval: interval}
		t.Cleanup(func() { kA.kill(); kB.kill() })
		kA.startA()
		kB.startA()
		c = kA
		pidsB = kB.pids
	}
	arps := p.net.watchARP()
	var out []time.Duration
	for i := range reps {
		waitFor(t, who+": A with the VIP, B without", 60*time.Second, func() bool { return hasVIP(t, A) && !hasVIP(t, B) })
		waitFor(t, who+": answers through A", 20*time.Second, func() bool {
			_, err := A.firstAnswer(time.Now(), time.Second)
			return err == nil
		})
		time.Sleep(time.Duration(4*interval*float64(time.Second)) + 500*time.Millisecond) // B settled on A's adverts
		moves := 0
		if dB != nil {
			moves = strings.Count(dB.logs.String(), "to=master took=")
		}
		var tr *failoverTrace
		if tracing() {
			tr = p.startTrace(pidsB())
		}
		t0 := time.Now()
		p.link(A, false)
		cut := time.Since(t0)
		c.killA()
		killed := time.Since(t0)
		at, err := A.firstAnswer(t0, 30*time.Second)
		if err != nil {
			t.Fatalf("%s, advert %vs, run %d: %v", who, interval, i+1, err)
		}
		d := at.Sub(t0)
		garp := "none seen"
		if g, ok := arps.after(t0); ok {
			garp = fmt.Sprintf("%.3fs", g.Seconds())
		}
		moved := ""
		if dB != nil {
			waitFor(t, "B's log of the VIP move", 5*time.Second, func() bool { return strings.Count(dB.logs.String(), "to=master took=") > moves })
			logs := dB.logs.String()
			k := strings.LastIndex(logs, "to=master took=")
			moved, _, _ = strings.Cut(logs[k+len("to=master took="):], "\n")
			moved = "; B added the VIP in " + moved
		}
		fmt.Printf("%s, advert %gs, run %d: answered %.3fs after the kill; first gratuitous ARP for the VIP at the client %s%s; A's link cut in %.3fs, A dead at %.3fs\n",
			who, interval, i+1, d.Seconds(), garp, moved, cut.Seconds(), killed.Seconds())
		if tr != nil {
			tr.stop(t0, at, dB)
		}
		out = append(out, d)
		if !hasVIP(t, B) {
			t.Errorf("%s: answered but B has no VIP", who)
		}
		p.link(A, true)
		c.startA()
	}
	return out
}

type ipvsctlContender struct{ d *director }

func (c ipvsctlContender) startA() { c.d.start() }
func (c ipvsctlContender) killA()  { c.d.stop(syscall.SIGKILL) }

// kaDirector is keepalived (VRRP only, vrrp_version 3) in a director's namespace.
type kaDirector struct {
	l        *lab
	prio     int
	interval float64
	cmd      *exec.Cmd
	dir      string
	done     chan struct{}
}

func (k *kaDirector) startA() {
	t := k.l.t
	k.dir = t.TempDir()
	conf := fmt.Sprintf(`global_defs {
  vrrp_version 3
}
vrrp_instance VI_1 {
  state BACKUP
  interface eth0
  virtual_router_id 51
  priority %d
  advert_int %v
  virtual_ipaddress {
    %s/32 dev eth0
  }
}
`, k.prio, k.interval, vip)
	path := filepath.Join(k.dir, "keepalived.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	k.cmd = exec.Command("ip", "netns", "exec", k.l.dir, "keepalived", "-n", "-P",
		"-f", path, "-p", filepath.Join(k.dir, "keepalived.pid"), "-r", filepath.Join(k.dir, "vrrp.pid"))
	logs := &syncBuffer{}
	k.cmd.Stdout, k.cmd.Stderr = logs, logs
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		t.Fatalf("start keepalived: %v", err)
	}
	done := make(chan struct{})
	k.done = done
	go func() { k.cmd.Wait(); close(done) }()
	waitFor(t, "keepalived's VRRP process", 20*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(k.dir, "vrrp.pid"))
		return err == nil
	})
}

// kill SIGKILLs keepalived's VRRP child and its parent.
func (k *kaDirector) kill() {
	if k.cmd == nil {
		return
	}
	if b, err := os.ReadFile(filepath.Join(k.dir, "vrrp.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	k.cmd.Process.Kill()
	<-k.done
	k.cmd = nil
}

func (k *kaDirector) killA() { k.kill() }

// pids are keepalived's parent and its VRRP child.
func (k *kaDirector) pids() []int {
	out := []int{k.cmd.Process.Pid}
	if b, err := os.ReadFile(filepath.Join(k.dir, "vrrp.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// arpWatch records when ARP packets whose sender address is the VIP (the
// new master's gratuitous ARPs) reach the client: it tells the directors'
// part of a failover from the client's.
type arpWatch struct {
	mu  sync.Mutex
	ats []time.Time
}

func (l *lab) watchARP() *arpWatch {
	w := &arpWatch{}
	var fd int
	var err error
	inNS(l.t, l.cli, func() {
		fd, err = syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(htons(syscall.ETH_P_ARP)))
	})
	if err != nil {
		l.t.Fatalf("ARP watch: %v", err)
	}
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &syscall.Timeval{Usec: 200000})
	stop := make(chan struct{})
	l.t.Cleanup(func() { close(stop) })
	want := net.ParseIP(vip).To4()
	go func() {
		defer syscall.Close(fd)
		buf := make([]byte, 1500)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, _, err := syscall.Recvfrom(fd, buf, 0)
			if err != nil || n < 42 {
				continue
			}
			// Ethernet (14), then ARP: ... sender hardware 22..28, sender protocol 28..32.
			if bytes.Equal(buf[28:32], want) {
				w.mu.Lock()
				w.ats = append(w.ats, time.Now())
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// after is the first ARP from the VIP at or after t.
func (w *arpWatch) after(t time.Time) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.ats {
		if !at.Before(t) {
			return at.Sub(t), true
		}
	}
	return 0, false
}
