//go:build vmtest

package vmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// failoverTrace is IPVSCTL_BENCH_TRACE=1's view of one failover of the
// benchmark: the packets on the new master B's eth0 and the client's
// (tcpdump), B's daemon log, the CPU time of B's VRRP process and of the
// whole VM, and B's and the client's counters across it, all as ms after
// the kill, so that the time from the gratuitous ARP to the first answer
// can be taken apart.
type failoverTrace struct {
	p      *pair
	dumps  []*exec.Cmd
	outs   []*syncBuffer
	names  []string
	before map[string]map[string]int64
	cpu    *cpuSampler
}

func tracing() bool { return os.Getenv("IPVSCTL_BENCH_TRACE") != "" }

// startTrace starts tcpdump in B's namespace and the client's, reads the
// counters and samples the CPU time of pids (B's VRRP processes).
func (p *pair) startTrace(pids []int) *failoverTrace {
	tr := &failoverTrace{p: p, before: map[string]map[string]int64{}}
	for _, w := range []struct{ name, ns string }{{"B", p.b.dir}, {"cli", p.net.cli}} {
		out := &syncBuffer{}
		cmd := exec.Command("ip", "netns", "exec", w.ns, "tcpdump", "-i", "eth0", "-p", "-n", "-e", "-tt", "-l",
			"--immediate-mode", "-s", "128", "arp or tcp port 80 or ip proto 112")
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			p.t.Fatalf("tcpdump in %s: %v", w.ns, err)
		}
		tr.dumps, tr.outs, tr.names = append(tr.dumps, cmd), append(tr.outs, out), append(tr.names, w.name)
		tr.before[w.name] = nstat(w.ns)
	}
	waitFor(p.t, "tcpdump listening", 20*time.Second, func() bool {
		for _, o := range tr.outs {
			if !strings.Contains(o.String(), "listening on") {
				return false
			}
		}
		return true
	})
	tr.cpu = startCPUSampler(pids)
	return tr
}

// traceLine is one packet (who: B or cli) or log line (Blog), at ms after the kill.
type traceLine struct {
	at   float64
	who  string
	text string
}

var (
	logTime  = regexp.MustCompile(`^time=(\S+) `)
	cliPort  = regexp.MustCompile(`198\.18\.0\.2\.(\d+) > 198\.18\.0\.100\.80:`)
	toPort   = regexp.MustCompile(`198\.18\.0\.100\.80 > 198\.18\.0\.2\.(\d+):`)
	srcMAC   = regexp.MustCompile(`^(\S+) > (\S+),`)
	garpLine = "tell " + vip + ","
)

// stop ends the captures and prints the phases and every line from 50 ms
// before the kill. answered is when the benchmark saw the first answer.
func (tr *failoverTrace) stop(t0, answered time.Time, dB *director) {
	time.Sleep(300 * time.Millisecond)
	samples := tr.cpu.stop()
	for i := range samples {
		samples[i].at = ms(t0, samples[i].when)
	}
	var lines []traceLine
	for i, cmd := range tr.dumps {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
		for _, l := range strings.Split(tr.outs[i].String(), "\n") {
			f := strings.SplitN(l, " ", 2)
			if len(f) < 2 {
				continue
			}
			sec, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				continue
			}
			lines = append(lines, traceLine{ms(t0, time.Unix(0, int64(sec*1e9))), tr.names[i], f[1]})
		}
	}
	if dB != nil {
		for _, l := range strings.Split(dB.logs.String(), "\n") {
			m := logTime.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, m[1])
			if err != nil {
				continue
			}
			lines = append(lines, traceLine{ms(t0, at), "Blog", l[len(m[0]):]})
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].at < lines[j].at })
	fmt.Printf("--- phases (ms after the kill): %s\n", phases(lines, ms(t0, answered), samples))
	fmt.Printf("--- trace (B: B's eth0, cli: the client's eth0, Blog: B's daemon; SYNs to the dead master left out)\n")
	for _, l := range lines {
		if l.at < -50 {
			continue
		}
		if l.who != "Blog" && strings.Contains(l.text, "Flags [S],") && !strings.Contains(l.text, "> "+macOf(lines)) &&
			!strings.HasPrefix(l.text, macOf(lines)) {
			continue
		}
		fmt.Printf("%9.3f %-4s %s\n", l.at, l.who, l.text)
	}
	for _, w := range []struct{ name, ns string }{{"B", tr.p.b.dir}, {"cli", tr.p.net.cli}} {
		after := nstat(w.ns)
		var d []string
		for k, v := range after {
			if dv := v - tr.before[w.name][k]; dv != 0 {
				d = append(d, fmt.Sprintf("%s=%d", k, dv))
			}
		}
		sort.Strings(d)
		fmt.Printf("--- %s counters across the run: %s\n", w.name, strings.Join(d, " "))
	}
	out, _ := exec.Command("ip", "netns", "exec", tr.p.b.dir, "ipvsadm", "-Ln", "--stats").CombinedOutput()
	fmt.Printf("--- B ipvsadm -Ln --stats\n%s", out)
}

func ms(t0, t time.Time) float64 { return float64(t.Sub(t0).Microseconds()) / 1000 }

// macOf is B's MAC: the source of the first advert from B's address.
func macOf(lines []traceLine) string {
	for _, l := range lines {
		if l.who == "B" && strings.Contains(l.text, addrB+" > 224.0.0.18") {
			if m := srcMAC.FindStringSubmatch(l.text); m != nil {
				return m[1]
			}
		}
	}
	return "?"
}

// phases sums one failover up: B's first advert, the first gratuitous ARP
// at the client and the last of its burst, the client's first SYN to B's
// MAC after it, and for the connection that was answered first its SYN,
// B's forward of it (and whether B had to ARP for the real server first),
// the SYN-ACK, the GET, the 200 at the client and the benchmark's answer;
// with the CPU B's VRRP processes and the whole VM used from B's advert to
// the answer.
func phases(lines []traceLine, answered float64, s []cpuSample) string {
	bmac := macOf(lines)
	find := func(from float64, ok func(traceLine) bool) (float64, traceLine, bool) {
		for _, l := range lines {
			if l.at >= from && ok(l) {
				return l.at, l, true
			}
		}
		return 0, traceLine{}, false
	}
	var parts []string
	add := func(name string, at float64, ok bool) {
		if ok {
			parts = append(parts, fmt.Sprintf("%s %.1f", name, at))
		} else {
			parts = append(parts, name+" -")
		}
	}
	adv, _, okAdv := find(0, func(l traceLine) bool { return l.who == "B" && strings.Contains(l.text, addrB+" > 224.0.0.18") })
	add("advert", adv, okAdv)
	garp, _, okG := find(0, func(l traceLine) bool {
		return l.who == "cli" && strings.HasPrefix(l.text, bmac) && strings.Contains(l.text, garpLine)
	})
	add("garp", garp, okG)
	if !okG {
		return strings.Join(parts, ", ")
	}
	last, n := garp, 0
	for _, l := range lines {
		if l.who == "cli" && l.at >= garp && l.at < garp+100 && strings.HasPrefix(l.text, bmac) && strings.Contains(l.text, garpLine) {
			last, n = l.at, n+1
		}
	}
	parts = append(parts, fmt.Sprintf("burst of %d to %.1f", n, last))
	syn, _, okS := find(garp, func(l traceLine) bool {
		return l.who == "cli" && strings.Contains(l.text, "> "+bmac+",") && strings.Contains(l.text, "Flags [S],")
	})
	add("first SYN to B", syn, okS)
	ok200, l200, ok := find(garp, func(l traceLine) bool { return l.who == "cli" && strings.Contains(l.text, "HTTP/1.1 200") })
	if !ok {
		return strings.Join(parts, ", ")
	}
	port := toPort.FindStringSubmatch(l200.text)[1]
	mine := func(who, flags string) func(traceLine) bool {
		return func(l traceLine) bool {
			m := cliPort.FindStringSubmatch(l.text)
			return l.who == who && m != nil && m[1] == port && strings.Contains(l.text, flags)
		}
	}
	s1, _, ok1 := find(garp-1000, mine("cli", "Flags [S],"))
	add("its SYN", s1, ok1)
	fw, _, ok2 := find(s1, func(l traceLine) bool {
		return mine("B", "Flags [S],")(l) && strings.HasPrefix(l.text, bmac)
	})
	add("B forwards it", fw, ok2)
	if _, _, arp := find(s1, func(l traceLine) bool {
		return l.who == "B" && l.at <= fw && strings.Contains(l.text, "Request who-has 198.18.0.1") && strings.Contains(l.text, "tell "+addrB)
	}); arp {
		parts[len(parts)-1] += " (after an ARP for the real server)"
	}
	sa, _, ok3 := find(s1, func(l traceLine) bool {
		m := toPort.FindStringSubmatch(l.text)
		return l.who == "cli" && m != nil && m[1] == port && strings.Contains(l.text, "Flags [S.]")
	})
	add("SYN-ACK", sa, ok3)
	get, _, ok4 := find(s1, mine("cli", "HTTP: GET"))
	add("GET", get, ok4)
	add("200", ok200, true)
	add("answered", answered, true)
	if okAdv && len(s) > 0 {
		a, b := sampleAt(s, adv), sampleAt(s, answered)
		if b.at > a.at {
			wall := b.at - a.at
			parts = append(parts, fmt.Sprintf("from the advert to the answer (%.0f ms sampled): B's VRRP processes %.1f ms of CPU, the VM's 2 CPUs %.0f%% busy",
				wall, float64(b.procNS-a.procNS)/1e6, 100*float64(b.busy-a.busy)/float64(b.total-a.total)))
		}
	}
	return strings.Join(parts, ", ")
}

// cpuSample is, at one time (ms after the kill once shifted), the CPU time
// of the sampled processes (ns) and the VM's busy and total jiffies.
type cpuSample struct {
	at          float64
	when        time.Time
	procNS      int64
	busy, total int64
}

type cpuSampler struct {
	pids  []int
	stopc chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	s     []cpuSample
	t0    time.Time
}

// startCPUSampler reads the processes' CPU time and /proc/stat every 5 ms.
func startCPUSampler(pids []int) *cpuSampler {
	c := &cpuSampler{pids: pids, stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			s := cpuSample{when: time.Now(), procNS: procCPU(c.pids)}
			s.busy, s.total = vmCPU()
			c.mu.Lock()
			c.s = append(c.s, s)
			c.mu.Unlock()
			select {
			case <-c.stopc:
				return
			case <-t.C:
			}
		}
	}()
	return c
}

func (c *cpuSampler) stop() []cpuSample {
	close(c.stopc)
	<-c.done
	return c.s
}

// sampleAt is the first sample at or after at (ms after the kill), which
// the caller's lines are relative to: the samples carry wall times.
func sampleAt(s []cpuSample, at float64) cpuSample {
	return s[sort.Search(len(s), func(i int) bool { return s[i].at >= at })%len(s)]
}

// procCPU sums the time on CPU of every thread of the processes (schedstat).
func procCPU(pids []int) int64 {
	var n int64
	for _, pid := range pids {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if v, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64); err == nil {
				n += v
			}
		}
	}
	return n
}

// vmCPU is the VM's busy and total jiffies, all CPUs (/proc/stat's cpu line).
func vmCPU() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

// nstat is the namespace's kernel counters (nstat -asz: absolute, history untouched).
func nstat(ns string) map[string]int64 {
	out, _ := exec.Command("ip", "netns", "exec", ns, "nstat", "-asz").CombinedOutput()
	m := map[string]int64{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && !strings.HasPrefix(f[0], "#") {
			if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				m[f[0]] = v
			}
		}
	}
	return m
}
