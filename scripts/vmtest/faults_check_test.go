//go:build vmtest

package vmtest

import (
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// checkPort is where the misbehaving real servers answer their checks (the
// lab's HTTP on :80 carries the traffic).
const checkPort = 8082

// misbehaver answers HTTP checks on checkPort as mode says: "ok", "hang"
// (accepts, reads, never answers), "slow" (answers after 3 s) or "reset"
// (accepts, then resets). It counts the checks it got and the connections
// left open.
type misbehaver struct {
	mode   atomic.Value // string
	checks atomic.Int64
	open   atomic.Int64
}

func (l *lab) misbehave(ns string) *misbehaver {
	l.t.Helper()
	m := &misbehaver{}
	m.mode.Store("ok")
	var ln net.Listener
	var err error
	inNS(l.t, ns, func() { ln, err = net.Listen("tcp", fmt.Sprintf(":%d", checkPort)) })
	if err != nil {
		l.t.Fatalf("listen in %s: %v", ns, err)
	}
	var wg sync.WaitGroup
	l.stopFn = append(l.stopFn, func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			m.checks.Add(1)
			m.open.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer m.open.Add(-1)
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				switch m.mode.Load().(string) {
				case "reset":
					c.(*net.TCPConn).SetLinger(0)
					return
				case "hang":
					io.Copy(io.Discard, c) // until the checker closes it (or 20 s)
					return
				case "slow":
					time.Sleep(3 * time.Second)
				}
				buf := make([]byte, 1024)
				c.Read(buf)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			}()
		}
	}()
	return m
}

// procWeights reads the real servers' weights of the director's kernel
// table from /proc/net/ip_vs in its namespace (no exec: fast under load),
// keyed "ADDR:PORT" of the real server, over every service.
func (l *lab) procWeights() map[string]int {
	w := map[string]int{}
	inNS(l.t, l.dir, func() {
		b, _ := os.ReadFile("/proc/thread-self/net/ip_vs")
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			// "  -> C612000B:0050      Route   10     0          0"
			if len(f) != 6 || f[0] != "->" || len(f[1]) != 13 {
				continue
			}
			a, err1 := strconv.ParseUint(f[1][:8], 16, 32)
			p, err2 := strconv.ParseUint(f[1][9:], 16, 16)
			n, err3 := strconv.Atoi(f[3])
			if err1 != nil || err2 != nil || err3 != nil {
				continue
			}
			w[fmt.Sprintf("%d.%d.%d.%d:%d", a>>24, a>>16&255, a>>8&255, a&255, p)] = n
		}
	})
	return w
}

// TestFaultRealServersMisbehave: under HTTP checks (interval 2 s, timeout
// 1.8 s, fall 2: a loaded emulated VM times out sound servers at 0.9 s) and
// traffic, one real server starts accepting the check's
// connection and never answering, one answers after 3 s, one resets; the
// fourth stays sound. Each of the three is quiesced within the fall window
// (and two seconds), the checker closes every connection it gave up on, the
// sound server's checks go on at their interval and it keeps its weight, and
// every request is answered.
func TestFaultRealServersMisbehave(t *testing.T) {
	l := newLab(t, 4, false)
	var ms []*misbehaver
	for _, ns := range l.rs {
		ms = append(ms, l.misbehave(ns))
	}
	l.daemon()
	const interval, timeout, fall = 2.0, 1.8, 2
	doc := fmt.Sprintf(`{"settings":{"network":"dr"},"services":[{"name":"web","protocol":"tcp","address":"%s","port":80,
	"interface":"eth0","scheduler":"rr",
	"check":{"type":"http","path":"/","port":%d,"interval":%v,"timeout":%v,"rise":2,"fall":%d,"on_failure":"quiesce"},
	"servers":[{"name":"rs1","address":"198.18.0.11","weight":10},{"name":"rs2","address":"198.18.0.12","weight":10},
	           {"name":"rs3","address":"198.18.0.13","weight":10},{"name":"rs4","address":"198.18.0.14","weight":10}]}]}`,
		vip, checkPort, interval, timeout, fall)
	l.apply(doc)
	svc := vip + ":80"
	all := map[string]int{"198.18.0.11:80": 10, "198.18.0.12:80": 10, "198.18.0.13:80": 10, "198.18.0.14:80": 10}
	waitFor(t, "four servers up at full weight", 30*time.Second, func() bool { return maps.Equal(l.weightsOf(svc), all) })
	stop := make(chan struct{})
	results := l.stream(svc, 50*time.Millisecond, 1000, stop)
	time.Sleep(time.Second)

	modes := []string{"hang", "slow", "reset"}
	broke := time.Now()
	soundBefore := ms[3].checks.Load()
	for i, m := range modes {
		ms[i].mode.Store(m)
	}
	out := map[string]time.Duration{}
	soundDropped := false
	_, ok := waitUntil(20*time.Second, func() bool {
		w := l.procWeights()
		soundDropped = soundDropped || w["198.18.0.14:80"] != 10
		for i, m := range modes {
			if _, seen := out[m]; !seen && w[fmt.Sprintf("198.18.0.%d:80", 11+i)] == 0 {
				out[m] = time.Since(broke)
			}
		}
		return len(out) == len(modes)
	})
	if !ok {
		t.Fatalf("not all quiesced 20 s after they broke: %v (weights %v)", out, l.weightsOf(svc))
	}
	window := time.Duration((fall*interval + timeout) * float64(time.Second))
	for _, m := range modes {
		t.Logf("%s real server -> weight 0 in %s (fall window %s)", m, out[m].Round(time.Millisecond), window)
		if out[m] > window+2*time.Second {
			t.Errorf("%s real server quiesced %s after it broke, past the fall window %s", m, out[m].Round(time.Millisecond), window)
		}
	}
	time.Sleep(4 * time.Second)
	elapsed := time.Since(broke)
	if got, want := ms[3].checks.Load()-soundBefore, int64(elapsed.Seconds()/interval)-2; got < want {
		t.Errorf("the sound server got %d checks in %s, want at least %d: its checks stalled", got, elapsed.Round(time.Millisecond), want)
	}
	if soundDropped || l.weightsOf(svc)["198.18.0.14:80"] != 10 {
		t.Errorf("the sound server lost its weight: %v", l.weightsOf(svc))
	}
	if n := ms[0].open.Load(); n > 1 {
		t.Errorf("%d check connections left open at the hanging server (the checker should close those it gave up on)", n)
	}
	close(stop)
	failed, total := 0, 0
	for _, r := range results() {
		total++
		if r.err != nil {
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d requests failed", failed, total)
	}
	faultRow(t, "real servers: check accepted and never answered / answered in 3 s / reset",
		fmt.Sprintf("%d/%d requests; the sound server's weight and checks", total-failed, total),
		fmt.Sprintf("the three quiesced (hang %s, slow %s, reset %s)", out["hang"].Round(10*time.Millisecond),
			out["slow"].Round(10*time.Millisecond), out["reset"].Round(10*time.Millisecond)), max(out["hang"], out["slow"], out["reset"]))
}

// TestFaultClockJumps: the wall clock jumps an hour forward, then an hour
// back, under HTTP checks (interval 1 s) and traffic. The checks keep their
// pace (a sound real server gets about one a second: no storm after the jump
// forward, no pause after the jump back), no real server changes weight, and
// every request is answered: the daemon's timers run on the monotonic clock.
func TestFaultClockJumps(t *testing.T) {
	l := newLab(t, 2, false)
	var ms []*misbehaver
	for _, ns := range l.rs {
		ms = append(ms, l.misbehave(ns))
	}
	l.daemon()
	doc := fmt.Sprintf(`{"settings":{"network":"dr"},"services":[{"name":"web","protocol":"tcp","address":"%s","port":80,
	"interface":"eth0","scheduler":"rr",
	"check":{"type":"http","path":"/","port":%d,"interval":1,"timeout":0.9,"rise":2,"fall":3,"on_failure":"quiesce"},
	"servers":[{"name":"rs1","address":"198.18.0.11","weight":10},{"name":"rs2","address":"198.18.0.12","weight":10}]}]}`, vip, checkPort)
	l.apply(doc)
	svc := vip + ":80"
	all := map[string]int{"198.18.0.11:80": 10, "198.18.0.12:80": 10}
	waitFor(t, "both servers up at full weight", 30*time.Second, func() bool { return maps.Equal(l.weightsOf(svc), all) })
	stop := make(chan struct{})
	results := l.stream(svc, 100*time.Millisecond, 600, stop)
	restore := func() { run(t, "date", "-s", "-1 hour") }
	var pace []string
	changed := false
	for _, jump := range []string{"+1 hour", "-1 hour"} {
		before := ms[0].checks.Load()
		start := time.Now()
		run(t, "date", "-s", jump)
		if jump == "+1 hour" {
			t.Cleanup(func() {
				if restore != nil {
					restore()
				}
			})
		} else {
			restore = nil
		}
		for range 30 { // 6 s
			time.Sleep(200 * time.Millisecond)
			changed = changed || !maps.Equal(l.procWeights(), all)
		}
		got, elapsed := ms[0].checks.Load()-before, time.Since(start)
		pace = append(pace, fmt.Sprintf("%s: %d checks in %s", jump, got, elapsed.Round(time.Millisecond)))
		if lo, hi := int64(elapsed.Seconds())-2, int64(elapsed.Seconds())+2; got < lo || got > hi {
			t.Errorf("clock %s: rs1 got %d checks in %s, want one a second (%d to %d)", jump, got, elapsed.Round(time.Millisecond), lo, hi)
		}
	}
	if changed {
		t.Errorf("a real server's weight changed while the clock jumped")
	}
	close(stop)
	failed, total := 0, 0
	for _, r := range results() {
		total++
		if r.err != nil {
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d requests failed", failed, total)
	}
	t.Logf("check pace: %s", strings.Join(pace, "; "))
	faultRow(t, "wall clock +1 h, then -1 h (checks every 1 s)", fmt.Sprintf("%d/%d requests; weights; check pace (%s)", total-failed, total, strings.Join(pace, ", ")),
		fmt.Sprintf("%d requests", failed), 0)
}
