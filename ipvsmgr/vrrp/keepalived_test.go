package vrrp

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// keepalived runs Debian's keepalived (VRRP only) in a network namespace,
// with its configuration, pid files and log in a temporary directory.
type keepalived struct {
	t           *testing.T
	vrrpPidFile string
	cmd         *exec.Cmd
	mu          sync.Mutex
	log         bytes.Buffer
	writes      []logWrite
	done        chan struct{}
}

func requireKeepalived(t *testing.T) {
	t.Helper()
	requireRoot(t, "keepalived")
}

// keepalivedConf is a VRRPv3 configuration with one instance per block.
func keepalivedConf(instances ...string) string {
	return "global_defs {\n  vrrp_version 3\n  script_user root\n  enable_script_security\n  vrrp_garp_master_delay 0\n  vrrp_garp_master_repeat 1\n}\n" + strings.Join(instances, "")
}

func startKeepalived(t *testing.T, ns, conf string) *keepalived {
	t.Helper()
	return startKeepalivedBin(t, "keepalived", ns, conf)
}

// startKeepalivedBin runs the keepalived binary bin (a build of another
// version, keepalived24_test.go).
func startKeepalivedBin(t *testing.T, bin, ns, conf string) *keepalived {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "keepalived.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	k := &keepalived{t: t, done: make(chan struct{}), vrrpPidFile: filepath.Join(dir, "vrrp.pid")}
	// -R: a killed VRRP process stays dead (the parent would respawn it).
	args := []string{"netns", "exec", ns, bin, "-n", "-l", "-D", "-G", "-R"}
	if help, _ := exec.Command(bin, "--help").CombinedOutput(); bytes.Contains(help, []byte("-P, --vrrp ")) {
		args = append(args, "-P") // VRRP only (a build without LVS has no checker, nor the flag)
	}
	k.cmd = exec.Command("ip", append(args, "-f", path, "-p", filepath.Join(dir, "keepalived.pid"), "-r", k.vrrpPidFile)...)
	k.cmd.Stdout = k
	k.cmd.Stderr = k
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		t.Fatalf("start keepalived: %v", err)
	}
	go func() { _ = k.cmd.Wait(); close(k.done) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("keepalived's VRRP process alive before the stop: %v", k.vrrpAlive())
		}
		k.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("keepalived's VRRP process alive at the end: %v", k.vrrpAlive())
			t.Logf("keepalived log:\n%s", k.logText())
		}
	})
	return k
}

// logWrite is when the log grew to end bytes.
type logWrite struct {
	end int
	at  time.Time
}

func (k *keepalived) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n, err := k.log.Write(p)
	k.writes = append(k.writes, logWrite{end: k.log.Len(), at: time.Now()})
	return n, err
}

// nth returns when the n-th (from 1) occurrence of s was written.
func (k *keepalived) nth(s string, n int) (time.Time, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	text := k.log.String()
	off := -1
	for range n {
		i := strings.Index(text[off+1:], s)
		if i < 0 {
			return time.Time{}, false
		}
		off += 1 + i
	}
	for _, w := range k.writes {
		if w.end >= off+len(s) {
			return w.at, true
		}
	}
	return time.Time{}, false
}

func (k *keepalived) logText() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.log.String()
}

// waitLog waits up to d for a log line containing s and returns when
// keepalived wrote it.
func (k *keepalived) waitLog(s string, d time.Duration) (time.Time, error) {
	return k.waitNth(s, 1, d)
}

// waitNth waits up to d for the n-th line containing s and returns when
// keepalived wrote it.
func (k *keepalived) waitNth(s string, n int, d time.Duration) (time.Time, error) {
	stop := time.Now().Add(d)
	for time.Now().Before(stop) {
		if at, ok := k.nth(s, n); ok {
			return at, nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("keepalived did not log %q %d times within %s", s, n, d)
}

// countLog is how many times s is in the log.
func (k *keepalived) countLog(s string) int { return strings.Count(k.logText(), s) }

// stop signals keepalived (the whole process group of `ip netns exec`, which
// execs keepalived in place) and waits up to 10 s for it to end.
func (k *keepalived) stop(sig syscall.Signal) {
	select {
	case <-k.done:
		return
	default:
	}
	_ = k.cmd.Process.Signal(sig)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case <-k.done:
	case <-ctx.Done():
		_ = k.cmd.Process.Kill()
		<-k.done
	}
}

// vrrpAlive says whether keepalived's VRRP process runs.
func (k *keepalived) vrrpAlive() bool {
	b, err := os.ReadFile(k.vrrpPidFile)
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && syscall.Kill(pid, 0) == nil
}
