package health

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/internal/nstest"
	"github.com/ipvsctl/ipvsctl/internal/testenv"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Tier 2 (root): each negotiate check against the real server from
// Debian's package, started by its test in a network namespace of its own
// with its configuration and data in a temporary directory, bound only to
// the namespace's address (198.18.N.1 on its lo): nothing listens on the
// host. The check runs on a thread moved into the namespace. Each server
// must pass, and fail when stopped, given a wrong password, a missing
// database or an answer other than receive. The servers start in parallel
// (t.Parallel), each bounded by serverStart.

// serverStart bounds a server's start, and each wait for it.
const serverStart = 60 * time.Second

var negNetnsSeq atomic.Int64

// needServer stops the test unless it runs as root and finds the server's
// programs (Debian's package pkg): under CI a missing one fails.
func needServer(t *testing.T, pkg string, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Need(t, "needs root to create network namespaces")
	}
	for _, tool := range append([]string{"ip"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Needf(t, "needs %s (Debian's %s): %v", tool, pkg, err)
		}
	}
}

// serverNetns creates a namespace, deleted when the test ends, with
// 198.18.N.1 on its lo; it returns the namespace and that address.
func serverNetns(t *testing.T) (string, netip.Addr) {
	t.Helper()
	n := negNetnsSeq.Add(1)
	name := fmt.Sprintf("neg-%d-%d", os.Getpid(), n)
	addr := netip.AddrFrom4([4]byte{198, 18, byte(100 + n), 1})
	sh(t, fmt.Sprintf("ip netns add %[1]s && ip -n %[1]s link set lo up && ip -n %[1]s addr add %[2]s/32 dev lo", name, addr))
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return name, addr
}

func sh(t *testing.T, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), serverStart)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("sh -c %q: %v\n%s", script, err, out)
	}
	return string(out)
}

// serverDir is a directory others may enter (servers that drop root read
// their files there), removed when the test ends.
func serverDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ipvsctl-neg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeFile(t *testing.T, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// daemon is a server run in the foreground in a namespace.
type daemon struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// startDaemon runs argv in namespace ns, its output in dir/name.log; it is
// stopped (SIGTERM, then SIGKILL after 10 s) when the test ends.
func startDaemon(t *testing.T, ns, dir, name string, argv ...string) *daemon {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	d := &daemon{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { cmd.Wait(); logf.Close(); close(d.done) }()
	t.Cleanup(func() { d.stop(t) })
	return d
}

// stop ends the daemon and its process group, bounded in time.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	select {
	case <-d.done:
		return
	default:
	}
	syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.done
	}
}

func (d *daemon) output() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

// runIn runs spec's check from inside namespace ns.
func runIn(t *testing.T, ns string, spec ipvsmgr.CheckSpec) Result {
	t.Helper()
	if spec.Timeout == 0 {
		spec.Timeout = 5 * time.Second
	}
	var c Checker
	var r Result
	if err := nstest.Do(ns, func() error { r = c.Run(context.Background(), &spec); return nil }); err != nil {
		t.Fatal(err)
	}
	return r
}

// waitPass runs the check until it passes, bounded by serverStart: a
// server is ready when it answers the check.
func waitPass(t *testing.T, ns string, d *daemon, spec ipvsmgr.CheckSpec) {
	t.Helper()
	deadline := time.Now().Add(serverStart)
	for {
		r := runIn(t, ns, spec)
		if r.Outcome == Pass {
			return
		}
		select {
		case <-d.done:
			t.Fatalf("%s ended before it passed (%s):\n%s", spec.Type, r.Reason, d.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not pass within %s: %s\n%s", spec.Type, serverStart, r.Reason, d.output())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// wantFail runs the check once and wants it to fail with a reason that
// holds want.
func wantFail(t *testing.T, ns string, spec ipvsmgr.CheckSpec, want string) {
	t.Helper()
	r := runIn(t, ns, spec)
	if r.Outcome != Fail || !strings.Contains(r.Reason, want) {
		t.Errorf("%s: got %s %q, want fail with %q", spec.Type, r.Outcome, r.Reason, want)
	}
}

// passwordFile writes a password file as the operator would (mode 0600).
func passwordFile(t *testing.T, dir, name, password string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	writeFile(t, p, password+"\n", 0o600)
	return p
}

// waitFor runs a check until it passes (a port open), bounded by
// serverStart, for servers set up after they listen.
func waitFor(t *testing.T, ns string, d *daemon, spec ipvsmgr.CheckSpec) { waitPass(t, ns, d, spec) }
