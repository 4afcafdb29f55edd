//go:build vmtest

package vmtest

import (
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// healthPort is where the health test's real servers serve: their own
// listeners, which the test stops and starts (the lab's on :80 stay up).
const healthPort = 8081

// switchable is an HTTP server in a namespace that can be stopped and started.
type switchable struct {
	l    *lab
	ns   string
	name string
	srv  *http.Server
}

func (s *switchable) start() {
	s.l.t.Helper()
	var ln net.Listener
	var err error
	inNS(s.l.t, s.ns, func() { ln, err = net.Listen("tcp", ":"+strconv.Itoa(healthPort)) })
	if err != nil {
		s.l.t.Fatalf("listen in %s: %v", s.ns, err)
	}
	name := s.name
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, name)
	}), ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
}

// stop closes the listener and every connection: the real server's HTTP
// process is gone, new connections are refused.
func (s *switchable) stop() {
	if s.srv != nil {
		s.srv.Close()
		s.srv = nil
	}
}

// daemon starts `ipvsctl serve` in the director namespace and waits for its socket.
func (l *lab) daemon(args ...string) func() {
	l.t.Helper()
	bin := os.Getenv("IPVSCTL_BIN")
	cmd := exec.Command("ip", append([]string{"netns", "exec", l.dir, bin, "--db", l.db, "serve", "--listen", ""}, args...)...)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	waitFor(l.t, "the daemon's socket", 20*time.Second, func() bool {
		c, err := net.Dial("unix", l.db+".sock")
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		l.t.Logf("daemon log:\n%s", logs.String())
	}
	l.t.Cleanup(stop)
	return stop
}

// weightsOf reads `ipvsadm -Ln` for the service: real server -> weight.
func (l *lab) weightsOf(svc string) map[string]int {
	out := l.ns(l.dir, "ipvsadm -Ln -t "+svc)
	re := regexp.MustCompile(`->\s+(\S+)\s+\S+\s+(\d+)`)
	w := map[string]int{}
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[2])
		w[m[1]] = n
	}
	return w
}

// result is one request of the client's stream.
type result struct {
	at   time.Time
	name string
	err  error
}

// stream sends requests through addr from the client, one every gap, until
// stop is closed or max requests are made (bounded either way).
func (l *lab) stream(addr string, gap time.Duration, max int, stop <-chan struct{}) func() []result {
	var mu sync.Mutex
	var out []result
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range max {
			select {
			case <-stop:
				return
			case <-time.After(gap):
			}
			var c net.Conn
			var err error
			inNS(l.t, l.cli, func() { c, err = net.DialTimeout("tcp", addr, 2*time.Second) })
			r := result{at: time.Now(), err: err}
			if err == nil {
				r.name, r.err = ask(c)
				c.Close()
			}
			mu.Lock()
			out = append(out, r)
			mu.Unlock()
		}
	}()
	return func() []result {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return out
	}
}

// A DR service with three real servers checked over HTTP under `ipvsctl
// serve`: a stopped server is quiesced within the fall window and no request
// fails after that; started again it returns after rise passes, its weight
// ramping; with all three stopped the sorry server answers.
func TestHealthChecksTakeDeadServersOut(t *testing.T) {
	checkTakesDeadServersOut(t, `"type":"http","path":"/"`, "HTTP 200")
}

// The same with tcp checks: the half-open prober (the daemon runs as root,
// with a raw socket) sees the stopped server's reset, and its SYN-ACK again.
func TestHealthTCPChecksTakeDeadServersOut(t *testing.T) {
	checkTakesDeadServersOut(t, `"type":"tcp"`, "SYN-ACK")
}

// checkTakesDeadServersOut runs the scenario with check (the check's type
// and its own fields, as JSON) whose passes are reported as passed.
func checkTakesDeadServersOut(t *testing.T, check, passed string) {
	l := newLab(t, 4, false) // rs4 is the sorry server
	var rs []*switchable
	for i, ns := range l.rs[:3] {
		s := &switchable{l: l, ns: ns, name: fmt.Sprintf("rs%d", i+1)}
		s.start()
		rs = append(rs, s)
		t.Cleanup(s.stop)
	}
	sorry := &switchable{l: l, ns: l.rs[3], name: "rs4"}
	sorry.start()
	t.Cleanup(sorry.stop)
	stopDaemon := l.daemon()
	// Timeouts under software emulation are long: a check gets most of its interval.
	const interval, timeout, fall, rise = 1.0, 0.9, 2, 2
	svc := fmt.Sprintf("%s:%d", vip, healthPort)
	doc := fmt.Sprintf(`{"settings":{"network":"dr"},"services":[{"name":"web","protocol":"tcp","address":"%s","port":%d,
	"interface":"eth0","scheduler":"rr",
	"check":{%s,"interval":%v,"timeout":%v,"rise":%d,"fall":%d,"on_failure":"quiesce","slow_start":4},
	"sorry_server":{"address":"198.18.0.14"},
	"servers":[{"name":"rs1","address":"198.18.0.11","weight":10},{"name":"rs2","address":"198.18.0.12","weight":10},
	           {"name":"rs3","address":"198.18.0.13","weight":10}]}]}`, vip, healthPort, check, interval, timeout, rise, fall)
	l.apply(doc)
	all := map[string]int{"198.18.0.11:8081": 10, "198.18.0.12:8081": 10, "198.18.0.13:8081": 10}
	waitFor(t, "three servers up at full weight", 20*time.Second, func() bool { return maps.Equal(l.weightsOf(svc), all) })

	stop := make(chan struct{})
	results := l.stream(svc, 20*time.Millisecond, 3000, stop)
	time.Sleep(time.Second)

	// rs1's HTTP process stops.
	stoppedAt := time.Now()
	rs[0].stop()
	var quiescedAt time.Time
	waitFor(t, "rs1 quiesced", 10*time.Second, func() bool {
		if l.weightsOf(svc)["198.18.0.11:8081"] == 0 {
			quiescedAt = time.Now()
			return true
		}
		return false
	})
	took := quiescedAt.Sub(stoppedAt)
	window := time.Duration((fall*interval + timeout) * float64(time.Second)) // fall checks, the last one's timeout
	t.Logf("rs1 stopped -> weight 0 in ipvsadm -Ln: %s (fall window %s)", took.Round(time.Millisecond), window)
	if took > window+time.Second {
		t.Errorf("rs1 quiesced %s after it stopped, well past the fall window %s", took, window)
	}
	time.Sleep(3 * time.Second)
	close(stop)
	res := results()
	failedAfter, failedBefore, byName := 0, 0, map[string]int{}
	for _, r := range res {
		switch {
		case r.err != nil && r.at.After(quiescedAt):
			failedAfter++
			t.Errorf("request at +%s after rs1 was quiesced failed: %v", r.at.Sub(quiescedAt).Round(time.Millisecond), r.err)
		case r.err != nil:
			failedBefore++
		case r.at.After(quiescedAt):
			byName[r.name]++
		}
	}
	t.Logf("%d requests: %d failed inside the fall window, %d after it; answers after: %v", len(res), failedBefore, failedAfter, byName)
	if byName["rs1"] != 0 || byName["rs2"] == 0 || byName["rs3"] == 0 {
		t.Errorf("after rs1 was quiesced the answers came from %v", byName)
	}
	if out, _ := l.ipvsctl("status"); !strings.Contains(out, "Health") || !strings.Contains(out, "down") {
		t.Errorf("status shows no health:\n%s", out)
	} else {
		t.Logf("status:\n%s", out)
	}

	// rs1 starts again: back after rise passes, ramping up to its weight.
	startedAt := time.Now()
	rs[0].start()
	var backAt time.Time
	var seen []int
	waitFor(t, "rs1 back at full weight", 20*time.Second, func() bool {
		w := l.weightsOf(svc)["198.18.0.11:8081"]
		if w > 0 && backAt.IsZero() {
			backAt = time.Now()
		}
		if len(seen) == 0 || seen[len(seen)-1] != w {
			seen = append(seen, w)
		}
		return w == 10
	})
	t.Logf("rs1 started -> weight > 0 in %s (rise %d x %vs); weights seen: %v", backAt.Sub(startedAt).Round(time.Millisecond), rise, interval, seen)
	ramped := false
	for _, w := range seen {
		ramped = ramped || w > 0 && w < 10
	}
	if !ramped {
		t.Errorf("rs1 came back without a ramp: weights %v", seen)
	}
	if out, _ := l.ipvsctl("health", "web", "rs1"); !strings.Contains(out, "up -> down") || !strings.Contains(out, "connection refused") ||
		!strings.Contains(out, passed) {
		t.Errorf("health web rs1 lacks the transitions (or the last result %q):\n%s", passed, out)
	} else {
		t.Logf("health web rs1:\n%s", out)
	}

	// All three stop: the sorry server answers.
	for _, s := range rs {
		s.stop()
	}
	waitFor(t, "the sorry server in", 10*time.Second, func() bool { _, ok := l.weightsOf(svc)["198.18.0.14:8081"]; return ok })
	counts := l.get(svc, 5)
	if counts["rs4"] != 5 {
		t.Errorf("with every real server down the answers were %v, want the sorry server (rs4)", counts)
	}
	t.Logf("all down: ipvsadm -Ln\n%s", l.ns(l.dir, "ipvsadm -Ln -t "+svc))
	stopDaemon()
}
