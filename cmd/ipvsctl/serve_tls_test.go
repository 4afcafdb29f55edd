package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/client"
	"github.com/ipvsctl/ipvsctl/server/store"
	"github.com/ipvsctl/ipvsctl/server/trust"
)

// TestServeHelper is `ipvsctl` in a child process (over a fake kernel):
// the serve tests start it with IPVSCTL_SERVE_HELPER set to its arguments.
func TestServeHelper(t *testing.T) {
	args := os.Getenv("IPVSCTL_SERVE_HELPER")
	if args == "" {
		return // only in the serve tests' child process
	}
	k := fakekernel.New()
	// A director whose kernel lists real servers the other way round: its
	// Maglev table differs from its peers' (the fingerprint tests).
	k.ReadReversed = os.Getenv("IPVSCTL_SERVE_HELPER_KERNEL") == "reversed"
	env := &cliEnv{stdout: os.Stdout, stderr: os.Stderr, getenv: func(string) string { return "" }, kernel: k}
	os.Exit(dispatch(env, strings.Split(args, "\x1f")))
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startServe runs serve in a child process until the test ends, or until
// stop, which waits for it to exit.
func startServe(t *testing.T, args ...string) (stop func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeHelper$")
	cmd.Env = append(os.Environ(), "IPVSCTL_SERVE_HELPER="+strings.Join(args, "\x1f"))
	out := &lockedOutput{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			if t.Failed() {
				t.Logf("serve said:\n%s", out)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

type lockedOutput struct{ strings.Builder }

// On every interface (not loopback) serve speaks TLS with the director's own
// certificate, which a remote CLI given --ca-cert believes (its SAN names
// 127.0.0.1), with HSTS; plain HTTP there needs --plain-http. The key and
// the database are their owner's only.
func TestServeTLSByDefaultOffLoopback(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "ipvsctl.db")
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	a := auth.New(st, auth.Config{Params: auth.CheapParams()})
	root := &auth.Principal{User: "root", Role: auth.Admin, Via: "cli"}
	if err := a.AddUser(ctx, root, "vera", auth.Viewer, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	tok, _, err := a.CreateToken(ctx, root, "vera", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	startServe(t, "--db", db, "serve", "--listen", fmt.Sprintf(":%d", port), "--interval", "1h")
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	cert, key := trust.IdentityPaths(dir)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var c *client.Client
		if c, err = client.NewRemote(base, tok, cert); err == nil {
			_, err = c.Status(ctx)
		}
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("status over TLS with --ca-cert: %v", err)
	}
	for path, want := range map[string]os.FileMode{key: 0o600, db: 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v", filepath.Base(path), fi.Mode().Perm(), err, want)
		}
	}
	// HSTS, and a client that does not know the certificate is refused.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: trust.PinnedConfig(mustFingerprint(t, cert), nil)}}
	resp, err := hc.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Strict-Transport-Security"), "max-age=") {
		t.Errorf("no HSTS under TLS: %q", resp.Header.Get("Strict-Transport-Security"))
	}
	if _, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{}}}).Get(base + "/healthz"); err == nil {
		t.Error("a client with the system's roots believed the self-signed certificate")
	}
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP answered on a non-loopback listener")
		}
	}

	// --plain-http is the explicit way out.
	db2 := filepath.Join(t.TempDir(), "ipvsctl.db")
	port2 := freePort(t)
	startServe(t, "--db", db2, "serve", "--listen", fmt.Sprintf(":%d", port2), "--plain-http", "--interval", "1h")
	deadline = time.Now().Add(30 * time.Second)
	for {
		resp, err = http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port2))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("--plain-http: %v", err)
	}
	resp.Body.Close()
}

func mustFingerprint(t *testing.T, cert string) string {
	fp, err := trust.CertFingerprint(cert)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}
