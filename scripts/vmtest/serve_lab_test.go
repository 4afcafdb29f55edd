//go:build vmtest

package vmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
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

	"github.com/ipvsctl/ipvsctl/internal/nstest"
)

// The director's address on the lab segment: the daemon's API listens there,
// and the client namespace reaches it as a remote machine would.
const (
	dirAddr     = labNet + ".1"
	apiAddr     = dirAddr + ":3636"
	metricsAddr = "127.0.0.1:9100" // --metrics-listen, on the director's loopback
	adminPass   = "correct horse battery staple"
)

// daemon is `ipvsctl serve` running in the director's namespace.
type daemon struct {
	t    *testing.T
	l    *lab
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ipvsctlIn runs the binary under test in namespace ns with stdin and
// extra environment; --db is the lab's unless args give another.
func (l *lab) ipvsctlIn(ns, stdin string, env []string, args ...string) (string, error) {
	l.t.Helper()
	bin := os.Getenv("IPVSCTL_BIN")
	if bin == "" {
		l.t.Fatal("IPVSCTL_BIN is not set (scripts/vmtest.sh sets it)")
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, bin, "--db", l.db}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// adminToken makes the first admin and a token for it (before serve starts).
func (l *lab) adminToken() string {
	l.t.Helper()
	if out, err := l.ipvsctlIn(l.dir, adminPass+"\n", nil, "user", "add", "admin", "--role", "admin", "--password-stdin"); err != nil {
		l.t.Fatalf("user add: %v\n%s", err, out)
	}
	bin := os.Getenv("IPVSCTL_BIN")
	cmd := exec.Command("ip", "netns", "exec", l.dir, bin, "--db", l.db, "token", "create", "--user", "admin", "--name", "vmtest")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		l.t.Fatalf("token create: %v\n%s", err, stderr.String())
	}
	tok := strings.TrimSpace(string(out))
	if tok == "" || strings.ContainsAny(tok, " \n") {
		l.t.Fatalf("token create printed %q", out)
	}
	return tok
}

// serve starts `ipvsctl serve` in the director's namespace and waits until
// it answers on its local socket. It serves plain HTTP (--plain-http) on
// the namespace's address: the tests speak to it from the lab's client
// namespace, inside a VM without a network.
func (l *lab) serve(env []string, args ...string) *daemon {
	l.t.Helper()
	bin := os.Getenv("IPVSCTL_BIN")
	d := &daemon{t: l.t, l: l, out: &syncBuffer{}, done: make(chan error, 1)}
	d.cmd = exec.Command("ip", append([]string{"netns", "exec", l.dir, bin, "--db", l.db, "serve", "--plain-http"}, args...)...)
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	l.t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Kill()
			<-d.done
		}
		if l.t.Failed() {
			l.t.Logf("ipvsctl serve said:\n%s", d.out.String())
		}
	})
	sock := socketClient(l.db)
	waitFor(l.t, "ipvsctl serve to answer on its socket", 30*time.Second, func() bool {
		select {
		case err := <-d.done:
			d.done <- err
			l.t.Fatalf("ipvsctl serve exited: %v\n%s", err, d.out.String())
		default:
		}
		code, _, err := sock.call("GET", "/healthz", "")
		return err == nil && code == 200
	})
	return d
}

// stop sends SIGTERM and waits (bounded) for a clean exit.
func (d *daemon) stop() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.t.Fatal(err)
	}
	select {
	case err := <-d.done:
		if err != nil {
			d.t.Fatalf("ipvsctl serve after SIGTERM: %v\n%s", err, d.out.String())
		}
	case <-time.After(60 * time.Second):
		d.cmd.Process.Kill()
		d.t.Fatalf("ipvsctl serve still running 60 s after SIGTERM:\n%s", d.out.String())
	}
}

// apiClient calls the daemon's API over one kept-alive connection.
type apiClient struct {
	hc    *http.Client
	base  string
	token string
}

// nsClient dials from namespace ns, as a program running there would.
func nsClient(ns, base, token string) *apiClient {
	tr := &http.Transport{DialContext: nsDialer(ns), MaxIdleConnsPerHost: 32}
	return &apiClient{hc: &http.Client{Transport: tr, Timeout: 60 * time.Second}, base: base, token: token}
}

// socketClient calls the daemon on its local socket beside the database.
func socketClient(db string) *apiClient {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", db+".sock")
	}}
	return &apiClient{hc: &http.Client{Transport: tr, Timeout: 60 * time.Second}, base: "http://ipvsctl"}
}

// nsDialer opens connections from a thread in namespace ns.
func nsDialer(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := nstest.Do(ns, func() (err error) {
			var d net.Dialer
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

func (a *apiClient) call(method, path, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// must calls and wants 200, decoding the answer into out (when not nil).
func (a *apiClient) must(t *testing.T, method, path, body string, out any) []byte {
	t.Helper()
	code, b, err := a.call(method, path, body)
	if err != nil || code != 200 {
		t.Fatalf("%s %s: %d %v\n%s", method, path, code, err, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %T: %v\n%s", method, path, out, err, b)
		}
	}
	return b
}

// writeResult is the part of a write's answer the tests read.
type writeResult struct {
	Revision int64    `json:"revision"`
	Changed  bool     `json:"changed"`
	Applied  bool     `json:"applied"`
	Changes  []string `json:"changes"`
	Failures []struct {
		Service string `json:"service"`
		Change  string `json:"change"`
		Err     string `json:"error"`
	} `json:"failures"`
}

// weights reads `-a ... -r RS -w N` lines of an ipvsadm -S style listing.
func weights(saved string) map[string]int {
	out := map[string]int{}
	for _, line := range strings.Split(saved, "\n") {
		f := strings.Fields(line)
		if len(f) >= 7 && f[0] == "-a" && f[len(f)-2] == "-w" {
			w, _ := strconv.Atoi(f[len(f)-1])
			out[f[2]+" "+f[4]] = w
		}
	}
	return out
}

var (
	metricLine = regexp.MustCompile(`^(\w+)\{([^}]*)\} (\S+)$`)
	labelPair  = regexp.MustCompile(`(\w+)="([^"]*)"`)
)

// ipvsCounters are conns, inpkts, outpkts, inbytes, outbytes, keyed
// "TCP VIP:PORT" for a service and "TCP VIP:PORT -> RIP:PORT" for a real
// server, as `ipvsadm -Ln --stats --exact` lists them.
type ipvsCounters map[string][5]uint64

func statsOfIpvsadm(t *testing.T, out string) ipvsCounters {
	t.Helper()
	c := ipvsCounters{}
	svc := ""
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		key := ""
		switch {
		case len(f) == 7 && (f[0] == "TCP" || f[0] == "UDP" || f[0] == "SCTP"):
			svc = f[0] + " " + f[1]
			key, f = svc, f[2:]
		case len(f) == 7 && f[0] == "->" && svc != "":
			key, f = svc+" -> "+f[1], f[2:]
		default:
			continue
		}
		var v [5]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				t.Fatalf("ipvsadm --stats line %q: %v", line, err)
			}
			v[i] = n
		}
		c[key] = v
	}
	return c
}

var counterNames = [5]string{"connections", "incoming_packets", "outgoing_packets", "incoming_bytes", "outgoing_bytes"}

// statsOfMetrics reads the same counters from /metrics (node_exporter's labels).
func statsOfMetrics(t *testing.T, text string) (ipvsCounters, map[string]float64) {
	t.Helper()
	c := ipvsCounters{}
	plain := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		if f := strings.Fields(line); len(f) == 2 && !strings.Contains(f[0], "{") {
			v, _ := strconv.ParseFloat(f[1], 64)
			plain[f[0]] = v
			continue
		}
		m := metricLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		lab := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			lab[p[1]] = p[2]
		}
		var key, counter string
		switch {
		case strings.HasPrefix(m[1], "ipvsctl_service_") && strings.HasSuffix(m[1], "_total"):
			key, counter = lab["proto"]+" "+lab["local_address"]+":"+lab["local_port"], strings.TrimSuffix(strings.TrimPrefix(m[1], "ipvsctl_service_"), "_total")
		case strings.HasPrefix(m[1], "ipvsctl_backend_") && strings.HasSuffix(m[1], "_total"):
			key = lab["proto"] + " " + lab["local_address"] + ":" + lab["local_port"] + " -> " + lab["remote_address"] + ":" + lab["remote_port"]
			counter = strings.TrimSuffix(strings.TrimPrefix(m[1], "ipvsctl_backend_"), "_total")
		default:
			v, _ := strconv.ParseFloat(m[3], 64)
			plain[m[1]+"{"+m[2]+"}"] = v
			continue
		}
		for i, n := range counterNames {
			if n == counter {
				v, err := strconv.ParseFloat(m[3], 64)
				if err != nil {
					t.Fatalf("metrics line %q: %v", line, err)
				}
				e := c[key]
				e[i] = uint64(v)
				c[key] = e
			}
		}
	}
	return c, plain
}
