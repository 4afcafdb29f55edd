// Package testmta runs a real MTA, Debian's OpenSMTPD (smtpd), in a network
// namespace a test made, for the tests that mail through one (the daemon's
// tier 2 and the VM tier): its spool and control socket on tmpfs in a mount
// namespace of its own, its configuration and maildirs in a temporary
// directory, listening only on the address given. It needs root and smtpd.
package testmta

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/internal/nstest"
)

// MTA is one smtpd run by Start; the test's cleanup stops it.
type MTA struct {
	maildir string
	boxes   []string
	log     string
}

// Mail is one delivered message.
type Mail struct {
	Box    string // the recipient's user
	Header mail.Header
	Body   string
}

// Start runs smtpd in namespace ns, listening on addr port 25 and delivering
// the mail for each of users@domain to a maildir of its own; it returns
// once smtpd accepts connections there (dialled from ns), at most 30 s.
func Start(t testing.TB, ns, addr, domain string, users ...string) *MTA {
	t.Helper()
	if _, err := exec.LookPath("smtpd"); err != nil {
		t.Fatalf("smtpd (Debian's opensmtpd): %v", err)
	}
	dir, err := os.MkdirTemp("", "ipvsctl-mta-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	m := &MTA{maildir: filepath.Join(dir, "mail"), boxes: users, log: filepath.Join(dir, "smtpd.log")}
	if err := os.MkdirAll(m.maildir, 0o1777); err != nil { // delivered as nobody
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	os.Chmod(m.maildir, 0o1777)
	table := ""
	for i, u := range users {
		if i > 0 {
			table += ", "
		}
		table += fmt.Sprintf("%q = \"nobody\"", u+"@"+domain)
	}
	conf := filepath.Join(dir, "smtpd.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`listen on %s port 25
table vusers { %s }
action "deliver" maildir "%s/%%{rcpt.user}" virtual <vusers>
match from any for domain %q action "deliver"
`, addr, table, m.maildir, domain)), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(m.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("ip", "netns", "exec", ns, "unshare", "--mount", "--propagation", "private", "sh", "-c",
		"mount -t tmpfs -o mode=0755 tmpfs /var/spool && mount -t tmpfs tmpfs /run && exec smtpd -d -f "+conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		err := nstest.Do(ns, func() error {
			c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", net.JoinHostPort(addr, "25"))
			if err == nil {
				c.Close()
			}
			return err
		})
		if err == nil {
			return m
		}
		select {
		case <-done:
			t.Fatalf("smtpd ended before it listened on %s:25:\n%s", addr, m.Log())
		case <-ctx.Done():
			t.Fatalf("smtpd never listened on %s:25: %v\n%s", addr, err, m.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Log is smtpd's output so far.
func (m *MTA) Log() string { b, _ := os.ReadFile(m.log); return string(b) }

// Mail is what the maildirs hold now (each box's new mail).
func (m *MTA) Mail() []Mail {
	var out []Mail
	for _, box := range m.boxes {
		files, _ := filepath.Glob(filepath.Join(m.maildir, box, "new", "*"))
		for _, f := range files {
			raw, err := os.Open(f)
			if err != nil {
				continue
			}
			msg, err := mail.ReadMessage(raw)
			if err == nil {
				body, _ := io.ReadAll(msg.Body)
				out = append(out, Mail{Box: box, Header: msg.Header, Body: string(body)})
			}
			raw.Close()
		}
	}
	return out
}
