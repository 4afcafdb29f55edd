package vrrp

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// keepalived runs Debian's keepalived (VRRP only) in a network namespace,
// with its configuration, pid files and log in a temporary directory.
type keepalived struct {
	t    *testing.T
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  bytes.Buffer
	done chan struct{}
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
	dir := t.TempDir()
	path := filepath.Join(dir, "keepalived.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	k := &keepalived{t: t, done: make(chan struct{})}
	k.cmd = exec.Command("ip", "netns", "exec", ns, "keepalived", "-n", "-l", "-D", "-G", "-P",
		"-f", path, "-p", filepath.Join(dir, "keepalived.pid"), "-r", filepath.Join(dir, "vrrp.pid"))
	k.cmd.Stdout = k
	k.cmd.Stderr = k
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		t.Fatalf("start keepalived: %v", err)
	}
	go func() { _ = k.cmd.Wait(); close(k.done) }()
	t.Cleanup(func() {
		k.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("keepalived log:\n%s", k.logText())
		}
	})
	return k
}

func (k *keepalived) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.log.Write(p)
}

func (k *keepalived) logText() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.log.String()
}

// waitLog waits up to d for a log line containing s and returns when it came.
func (k *keepalived) waitLog(s string, d time.Duration) (time.Time, error) {
	stop := time.Now().Add(d)
	for time.Now().Before(stop) {
		if strings.Contains(k.logText(), s) {
			return time.Now(), nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("keepalived did not log %q within %s", s, d)
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
