// Package sshtest runs Debian's sshd as a real server in a network
// namespace, for tests that push to, verify and undo a real server over SSH
// (tier 2: root, the host kernel). Tests skip without root, ip or sshd.
package sshtest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/ipvsctl/ipvsctl/internal/nstest"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/ipvsctl/ipvsctl/internal/testenv"
)

// RIP is the real server's address; its sshd listens on RIP:22.
const RIP = "198.18.7.2"

// Bed is a real server namespace running sshd and a client namespace that
// Dial connects from, joined by a veth pair:
// client 198.18.7.1/24 (cl0) -- 198.18.7.2/24 (eth0) real server.
type Bed struct {
	HostKey ssh.PublicKey // sshd's host key
	Signer  ssh.Signer    // a key sshd accepts for root
	rsNS    string
	client  string
	// hostFiles are Options.HostSysctls' files, by sysctl.
	hostFiles map[string]string
}

var seq atomic.Int32

// Start runs a bed until the test ends; it skips the test without root,
// ip or Debian's openssh-server.
func Start(t testing.TB) *Bed { t.Helper(); return StartWith(t, Options{}) }

// Options change what a bed's sshd (and every session it opens) sees.
type Options struct {
	// HostSysctls are host-wide sysctls (dotted names, e.g. fs.file-max)
	// with a value: the bed's sshd runs in a mount namespace where a file
	// of the bed, holding that value, is bind-mounted over each one's
	// /proc/sys entry, so that a test may read and write them over SSH
	// without changing the machine's own (HostSysctl reads the file).
	HostSysctls map[string]string
}

// HostSysctl is the value a session wrote to (or the bed set in) host-wide
// sysctl key, as Options.HostSysctls gave it.
func (b *Bed) HostSysctl(t testing.TB, key string) string {
	t.Helper()
	v, err := os.ReadFile(b.hostFiles[key])
	if err != nil {
		t.Fatalf("host sysctl %s of the bed: %v", key, err)
	}
	return strings.Join(strings.Fields(string(v)), " ")
}

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *Bed {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Need(t, "needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.Needf(t, "needs ip: %v", err)
	}
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/sshd"); serr != nil {
			testenv.Need(t, "needs Debian's openssh-server (apt-get install -y openssh-server)")
		}
		sshd = "/usr/sbin/sshd"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := &Bed{rsNS: NewNetns(t), client: NewNetns(t)}
	run(t, ctx, fmt.Sprintf(`set -e
ip -n %[1]s link set lo up
ip -n %[2]s link set lo up
ip -n %[1]s link add eth0 type veth peer name cl0 netns %[2]s
ip -n %[1]s addr add %[3]s/24 dev eth0
ip -n %[2]s addr add 198.18.7.1/24 dev cl0
ip -n %[1]s link set eth0 up
ip -n %[2]s link set cl0 up`, b.rsNS, b.client, RIP))

	dir := t.TempDir()
	hostPriv, hostPub := GenKey(t)
	b.HostKey = hostPub
	clientPriv, clientPub := GenKey(t)
	if b.Signer, err = ssh.NewSignerFromKey(clientPriv); err != nil {
		t.Fatal(err)
	}
	hostKeyFile := filepath.Join(dir, "ssh_host_ed25519_key")
	blk, err := ssh.MarshalPrivateKey(hostPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, hostKeyFile, string(pem.EncodeToMemory(blk)))
	writeFile(t, filepath.Join(dir, "authorized_keys"), string(ssh.MarshalAuthorizedKey(clientPub)))
	cfg := filepath.Join(dir, "sshd_config")
	writeFile(t, cfg, fmt.Sprintf(`ListenAddress %s:22
HostKey %s
AuthorizedKeysFile %s
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
`, RIP, hostKeyFile, filepath.Join(dir, "authorized_keys")))
	// sshd insists on its privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	b.hostFiles = map[string]string{}
	for k, v := range o.HostSysctls {
		f := filepath.Join(dir, "sysctl-"+k)
		writeFile(t, f, v+"\n")
		b.hostFiles[k] = f
	}
	b.startSSHD(t, ctx, sshd, cfg)
	return b
}

func (b *Bed) startSSHD(t testing.TB, ctx context.Context, sshd, cfg string) {
	t.Helper()
	var logs syncBuffer
	// ip netns exec gives sshd a mount namespace of its own (slave to the
	// host's): the bind mounts stay in it.
	script := ""
	for k, f := range b.hostFiles {
		script += fmt.Sprintf("mount --bind %s /proc/sys/%s\n", f, strings.ReplaceAll(k, ".", "/"))
	}
	cmd := exec.Command("ip", "netns", "exec", b.rsNS, "sh", "-ec", script+`exec "$@"`, "sh", sshd, "-D", "-e", "-f", cfg)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("sshd log:\n%s", logs.String())
		}
	})
	// Wait, bounded, until sshd accepts connections.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := b.Dial(ctx, "tcp", RIP+":22")
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd did not start: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Dial connects from the client namespace.
func (b *Bed) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := nstest.Do(b.client, func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// KnownHosts writes a known_hosts file holding key for RIP:22 (empty when
// key is nil) and returns its path.
func (b *Bed) KnownHosts(t testing.TB, key ssh.PublicKey) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "known_hosts")
	content := ""
	if key != nil {
		content = knownhosts.Line([]string{knownhosts.Normalize(RIP + ":22")}, key) + "\n"
	}
	writeFile(t, f, content)
	return f
}

// InRS runs a shell command in the real server's namespace.
func (b *Bed) InRS(t testing.TB, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return run(t, ctx, fmt.Sprintf("ip netns exec %s sh -c '%s'", b.rsNS, script))
}

// GenKey makes an ed25519 key pair.
func GenKey(t testing.TB) (ed25519.PrivateKey, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return priv, sp
}

// NewSigner makes a client key no real server knows, for tests that never
// get as far as logging in.
func NewSigner(t testing.TB) ssh.Signer {
	t.Helper()
	priv, _ := GenKey(t)
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Refuse is a dialer whose every connection is refused, as by a real
// server whose SSH port is closed.
func Refuse(ctx context.Context, network, addr string) (net.Conn, error) {
	return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
}

// NewNetns creates a network namespace deleted when the test ends.
func NewNetns(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("sshtest-%d-%d", os.Getpid(), seq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return name
}

func run(t testing.TB, ctx context.Context, script string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("sh -c %q: %v\n%s", script, err, out)
	}
	return string(out)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// ListenRS opens a TCP listener on RIP:port in the real server's namespace
// with the given listen() backlog (as an application asking for it would),
// until the test ends.
func (b *Bed) ListenRS(t testing.TB, port, backlog int) {
	t.Helper()
	var fd int
	var err error
	func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		orig, gerr := netns.Get()
		if gerr != nil {
			err = gerr
			return
		}
		defer orig.Close()
		h, gerr := netns.GetFromName(b.rsNS)
		if gerr != nil {
			err = gerr
			return
		}
		defer h.Close()
		if err = netns.Set(h); err != nil {
			return
		}
		defer netns.Set(orig)
		if fd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0); err != nil {
			return
		}
		ip := net.ParseIP(RIP).To4()
		sa := &syscall.SockaddrInet4{Port: port}
		copy(sa.Addr[:], ip)
		if err = syscall.Bind(fd, sa); err == nil {
			err = syscall.Listen(fd, backlog)
		}
	}()
	if err != nil {
		t.Fatalf("listen on %s:%d in the real server's namespace: %v", RIP, port, err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
}

// Daemon runs cmd in the real server's namespace, a server that forks into
// the background and writes its pid to pidFile (nginx, haproxy -D), and
// stops that process when the test ends.
func (b *Bed) Daemon(t testing.TB, pidFile, cmd string) {
	t.Helper()
	b.InRS(t, cmd)
	t.Cleanup(func() {
		raw, err := os.ReadFile(pidFile)
		if err != nil {
			t.Errorf("stop %s: %v", cmd, err)
			return
		}
		for _, f := range strings.Fields(string(raw)) {
			var pid int
			if _, err := fmt.Sscan(f, &pid); err != nil || pid <= 1 {
				continue
			}
			syscall.Kill(pid, syscall.SIGTERM)
			// Bounded: until it is gone, or 5 s.
			for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
				time.Sleep(50 * time.Millisecond)
			}
		}
	})
}

// Get fetches http://addr/ from the client namespace: the status line's
// code, or an error.
func (b *Bed) Get(ctx context.Context, addr string) (int, error) {
	c, err := b.Dial(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: rs\r\n\r\n"); err != nil {
		return 0, err
	}
	var proto string
	var code int
	if _, err := fmt.Fscan(c, &proto, &code); err != nil {
		return 0, fmt.Errorf("read the status line: %w", err)
	}
	return code, nil
}

// StartNginx writes conf (each "DIR" in it replaced by a directory of the
// test, "RIP" by the real server's address) to DIR/nginx.conf, with an
// empty DIR/conf.d, runs Debian's nginx with it in the real server's
// namespace until the test ends, and waits until http://RIP:port/ answers.
// It skips the test without nginx; conf should write its pid to
// DIR/nginx.pid.
func (b *Bed) StartNginx(t testing.TB, conf string, port int) (dir, path string) {
	t.Helper()
	if _, err := exec.LookPath("nginx"); err != nil {
		testenv.Needf(t, "needs Debian's nginx (apt-get install -y nginx): %v", err)
	}
	dir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(strings.NewReplacer("DIR", dir, "RIP", RIP).Replace(conf)), 0o644); err != nil {
		t.Fatal(err)
	}
	b.Daemon(t, filepath.Join(dir, "nginx.pid"), "nginx -c "+path)
	b.waitHTTP(t, fmt.Sprintf("%s:%d", RIP, port))
	return dir, path
}

// StartHAProxy is StartNginx for Debian's haproxy, in master-worker mode
// as Debian's unit runs it (-W; its pid file DIR/haproxy.pid names the
// master), started with an open-files limit of nofile.
func (b *Bed) StartHAProxy(t testing.TB, conf string, port, nofile int) (dir, path string) {
	t.Helper()
	if _, err := exec.LookPath("haproxy"); err != nil {
		testenv.Needf(t, "needs Debian's haproxy (apt-get install -y haproxy): %v", err)
	}
	dir = t.TempDir()
	path = filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(strings.NewReplacer("DIR", dir, "RIP", RIP).Replace(conf)), 0o644); err != nil {
		t.Fatal(err)
	}
	pid := filepath.Join(dir, "haproxy.pid")
	b.Daemon(t, pid, fmt.Sprintf("ulimit -n %d; haproxy -W -D -f %s -p %s", nofile, path, pid))
	b.waitHTTP(t, fmt.Sprintf("%s:%d", RIP, port))
	return dir, path
}

// waitHTTP waits, bounded, until http://addr/ answers 200.
func (b *Bed) waitHTTP(t testing.TB, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		code, err := b.Get(ctx, addr)
		cancel()
		if err == nil && code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET http://%s/: %d %v", addr, code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
