//go:build labtest

// Package lab tests scripts/lab.sh end to end (as root, on a machine that can
// run the VM test bed): go test -tags labtest ./scripts/lab
package lab

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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

// syncBuffer collects lab.sh's output while it runs.
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

// TestLab starts the lab, checks what a newcomer would see on 127.0.0.1:PORT
// (PORT: IPVSCTL_LAB_PORT, default 3636), then stops it with --stop and checks
// that nothing of it is left.
func TestLab(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Need(t, "the lab runs as root")
	}
	port := os.Getenv("IPVSCTL_LAB_PORT")
	if port == "" {
		port = "3636"
	}
	labDir := os.Getenv("IPVSCTL_LAB_DIR")
	if labDir == "" {
		labDir = "/run/ipvsctl-lab"
	}
	script, err := filepath.Abs("../lab.sh")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var out syncBuffer
	lab := exec.Command(script, "--port", port)
	lab.Stdout, lab.Stderr = &out, &out
	lab.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := lab.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := lab.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- lab.Wait() }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			exec.Command(script, "--stop").Run()
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
	})

	env := waitForLab(t, labDir, exited, &out)
	t.Logf("the lab was ready after %s", time.Since(start).Round(time.Second))
	url := "http://127.0.0.1:" + port
	if env["LAB_URL"] != url {
		t.Errorf("lab.env: LAB_URL %q, want %q", env["LAB_URL"], url)
	}
	if len(env["LAB_PASSWORD"]) < 12 || env["LAB_TOKEN"] == "" {
		t.Errorf("lab.env: a password of %d characters, token %q", len(env["LAB_PASSWORD"]), env["LAB_TOKEN"])
	}
	for _, want := range []string{"password        " + env["LAB_PASSWORD"], "API token       " + env["LAB_TOKEN"],
		"$ ipvsctl --server " + url + " --token $TOKEN status", "TCP  198.18.0.100:80 wlc", "TCP  198.18.0.110:80 rr"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lab.sh's output lacks %q:\n%s", want, out.String())
		}
	}

	t.Run("second start says so", func(t *testing.T) {
		b, err := exec.Command(script, "--port", port).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(b), "a lab is already running") {
			t.Errorf("a second lab.sh: %v\n%s", err, b)
		}
	})

	t.Run("healthz and the login page", func(t *testing.T) {
		code, body := get(t, url+"/healthz", "")
		if code != http.StatusOK || strings.TrimSpace(body) != "ok" {
			t.Errorf("/healthz: %d %q", code, body)
		}
		code, body = get(t, url+"/login", "")
		if code != http.StatusOK || !strings.Contains(strings.ToLower(body), "password") {
			t.Errorf("/login: %d\n%s", code, body)
		}
	})

	t.Run("the example services with their real servers", func(t *testing.T) {
		var services []struct {
			Name    string `json:"name"`
			Servers []struct {
				Name string `json:"name"`
			} `json:"servers"`
		}
		getJSON(t, url+"/api/v1/services", env["LAB_TOKEN"], &services)
		got := map[string][]string{}
		for _, s := range services {
			for _, rs := range s.Servers {
				got[s.Name] = append(got[s.Name], rs.Name)
			}
		}
		want := map[string][]string{"web": {"rs1", "rs2", "rs3"}, "web-nat": {"nat1", "nat2"}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("/api/v1/services: %v, want %v", got, want)
		}
	})

	t.Run("counters rise on every real server", func(t *testing.T) {
		before := conns(t, url, env["LAB_TOKEN"])
		// IPVS sums its counters every 2 s and the daemon polls every 2 s.
		time.Sleep(6 * time.Second)
		after := conns(t, url, env["LAB_TOKEN"])
		if len(after) != 7 {
			t.Fatalf("status has %d services and real servers, want 2 + 5: %v", len(after), after)
		}
		for key, n := range after {
			if n <= before[key] {
				t.Errorf("%s: connections %d, then %d 6 s later", key, before[key], n)
			}
		}
		t.Logf("connections: %v, 6 s later %v", before, after)
	})

	t.Run("the panel in Chromium", func(t *testing.T) { testPanel(t, url, env["LAB_PASSWORD"], env["LAB_TOKEN"]) })

	stopped := time.Now()
	if b, err := exec.Command(script, "--stop").CombinedOutput(); err != nil || !strings.Contains(string(b), "the lab is stopped") {
		t.Fatalf("lab.sh --stop: %v\n%s", err, b)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("lab.sh still runs 30 s after --stop")
	}
	t.Logf("--stop took %s", time.Since(stopped).Round(100*time.Millisecond))
	if left := processes(func(stat []string, cmdline string) bool {
		return stat[4] == strconv.Itoa(pgid) || strings.Contains(cmdline, "hostfwd=tcp:127.0.0.1:"+port+"-") ||
			strings.Contains(cmdline, "ipvsctl-vm/lab/ipvsctl")
	}); len(left) > 0 {
		t.Errorf("processes of the lab left after --stop:\n%s", strings.Join(left, "\n"))
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
		c.Close()
		t.Errorf("127.0.0.1:%s still accepts connections after --stop", port)
	}
	if _, err := os.Stat(filepath.Join(labDir, "lab.env")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s/lab.env left after --stop (%v)", labDir, err)
	}
}

// waitForLab waits for lab.sh to write lab.env (when the lab is ready) and returns its variables.
func waitForLab(t *testing.T, labDir string, exited <-chan error, out *syncBuffer) map[string]string {
	t.Helper()
	// lab.sh gives the guest 300 s once the VM boots; the build and the boot come first, slow on a busy machine.
	deadline := time.After(480 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("lab.sh stopped before the lab was ready: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("the lab was not ready after 480 s:\n%s", out.String())
		case <-time.After(time.Second):
		}
		b, err := os.ReadFile(filepath.Join(labDir, "lab.env"))
		if err != nil || !bytes.Contains(b, []byte("LAB_PID=")) {
			continue
		}
		// lab.sh prints the banner and the remote status right after writing lab.env.
		for !strings.Contains(out.String(), "Stop it with Ctrl-C") {
			select {
			case err := <-exited:
				t.Fatalf("lab.sh stopped: %v\n%s", err, out.String())
			case <-time.After(500 * time.Millisecond):
			}
		}
		env := map[string]string{}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), "=")
			env[k] = strings.Trim(v, "'")
		}
		return env
	}
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

func getJSON(t *testing.T, url, token string, v any) {
	t.Helper()
	code, body := get(t, url, token)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v\n%s", url, err, body)
	}
}

// labStatus is what the tests read of /api/v1/status: the daemon's read of the kernel.
type labStatus struct {
	Kernel struct {
		Available bool `json:"available"`
	} `json:"kernel"`
	Services []struct {
		Address string `json:"address"`
		Port    int    `json:"port"`
		Stats   struct {
			Conns uint64 `json:"conns"`
		} `json:"stats"`
		Servers []struct {
			Address string `json:"address"`
			Weight  uint32 `json:"weight"`
			Stats   struct {
				Conns uint64 `json:"conns"`
			} `json:"stats"`
		} `json:"servers"`
	} `json:"services"`
}

func status(t *testing.T, url, token string) *labStatus {
	t.Helper()
	var st labStatus
	getJSON(t, url+"/api/v1/status", token, &st)
	if !st.Kernel.Available {
		t.Fatal("/api/v1/status: the kernel is not available")
	}
	return &st
}

// conns reads /api/v1/status: the connections counted so far per service and real server.
func conns(t *testing.T, url, token string) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	for _, s := range status(t, url, token).Services {
		vs := fmt.Sprintf("%s:%d", s.Address, s.Port)
		m[vs] = s.Stats.Conns
		for _, rs := range s.Servers {
			m[vs+" -> "+rs.Address] = rs.Stats.Conns
		}
	}
	return m
}

// processes lists the host's processes for which match (on the fields of
// /proc/PID/stat after the command name, and the command line) is true.
func processes(match func(stat []string, cmdline string) bool) []string {
	var found []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := append([]string{"", ""}, strings.Fields(string(stat[i+1:]))...)
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		cmdline := strings.Join(strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00"), " ")
		if match(fields, cmdline) && !slices.Contains([]string{"Z"}, fields[2]) {
			found = append(found, fmt.Sprintf("%d %s", pid, cmdline))
		}
	}
	return found
}
