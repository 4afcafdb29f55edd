package bgp

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp/bgptest"
)

func TestPasswordFileIsReadAtUseAndChecked(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "peer.key")
	if err := os.WriteFile(good, []byte("md5-Key-42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := ipvsmgr.BGP{ASN: 65001, Peers: []ipvsmgr.BGPPeer{{Address: "198.18.0.1", ASN: 65000, PasswordFile: good}, {Address: "198.18.0.2", ASN: 65000}}}
	pw, err := ReadPasswords("settings.bgp", s)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Settings: s, Passwords: pw}
	if got := peerConfig(s.Peers[0], cfg.Password(s.Peers[0]), netip.Addr{}, false).Conf.AuthPassword; got != "md5-Key-42" {
		t.Errorf("the speaker's peer has key %q, want the file's, line end trimmed", got)
	}
	if got := peerConfig(s.Peers[1], cfg.Password(s.Peers[1]), netip.Addr{}, false).Conf.AuthPassword; got != "" {
		t.Errorf("a peer without password_file has key %q", got)
	}

	crlf := filepath.Join(dir, "crlf.key")
	os.WriteFile(crlf, []byte("md5-Key-42\r\n"), 0o600)
	bareCR := filepath.Join(dir, "cr.key")
	os.WriteFile(bareCR, []byte("md5-Key-42\r"), 0o600)
	for path, want := range map[string]string{crlf: "md5-Key-42", bareCR: "md5-Key-42\r"} {
		if k, err := ReadPasswordFile(path); err != nil || k != want {
			t.Errorf("%s: key %q, %v; want %q (one line end dropped, nothing else)", path, k, err, want)
		}
	}

	wide := filepath.Join(dir, "wide.key")
	os.WriteFile(wide, []byte("md5-Key-42"), 0o644)
	long := filepath.Join(dir, "long.key")
	os.WriteFile(long, []byte(strings.Repeat("k", 81)), 0o600)
	empty := filepath.Join(dir, "empty.key")
	os.WriteFile(empty, []byte("\n"), 0o600)
	fifo := filepath.Join(dir, "fifo.key")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		wide: "mode 0644", long: "longer than", empty: "empty", fifo: "not a regular file",
		filepath.Join(dir, "none"): "no such file",
	} {
		s.Peers[0].PasswordFile = path
		_, err := ReadPasswords("settings.bgp", s)
		if err == nil || !strings.Contains(err.Error(), "settings.bgp.peers[0].password_file: "+path) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want the field, the file and %q", path, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "md5-Key-42") {
			t.Errorf("%s: the error echoes the key: %v", path, err)
		}
	}
}

// TestSpeakerSignsWithTheKeyOfItsPasswordFile runs a router whose session
// needs a TCP MD5 key: a speaker without it gets no session, one whose
// password_file holds it does.
func TestSpeakerSignsWithTheKeyOfItsPasswordFile(t *testing.T) {
	const key = "md5-router-key-7"
	r := bgptest.StartRouterWithKey(t, key)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "router.key")
	if err := os.WriteFile(file, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	settings := ipvsmgr.BGP{ASN: 65001, Peers: []ipvsmgr.BGPPeer{{Address: "127.0.0.2", Port: r.Port, ASN: 65000, HoldTime: 9}}}
	cfg := Config{Settings: settings, RouterID: netip.MustParseAddr("198.18.0.1"), Source: netip.MustParseAddr("127.0.0.1")}

	// Unsigned: the router's kernel drops its SYNs. Two connect attempts
	// (ConnectRetry is 3 s) are given the time to fail.
	sp, err := Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(7 * time.Second)
	for time.Now().Before(deadline) && !r.Established(t) {
		time.Sleep(100 * time.Millisecond)
	}
	up := r.Established(t)
	sp.Stop(ctx, 0)
	if up {
		t.Fatal("a speaker without the key got a session: the router does not check TCP MD5, the test proves nothing")
	}

	cfg.Settings.Peers[0].PasswordFile = file
	if cfg.Passwords, err = ReadPasswords("settings.bgp", cfg.Settings); err != nil {
		t.Fatal(err)
	}
	sp, err = Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Stop(ctx, 0)
	waitFor(t, "the signed session to be established", func() bool {
		ps, err := sp.Peers(ctx)
		return err == nil && len(ps) == 1 && ps[0].Up && r.Established(t)
	})
}
