package arpguard

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SudoMode says when the scripts run through sudo on the real server.
type SudoMode string

const (
	SudoAuto   SudoMode = "auto" // when the user is not root
	SudoAlways SudoMode = "always"
	SudoNever  SudoMode = "never"
)

// SSHConfig is how the Pusher reaches real servers.
type SSHConfig struct {
	User    string
	Signers []ssh.Signer
	// KnownHostsFile holds the real servers' host keys. A key that is
	// not there is refused unless AcceptNewHostKeys, which records it (as
	// OpenSSH's StrictHostKeyChecking=accept-new does); a key that differs
	// from the recorded one is always refused.
	KnownHostsFile    string
	AcceptNewHostKeys bool
	Sudo              SudoMode
	// Parallel bounds how many real servers are worked on at once.
	Parallel int
	// Timeout bounds the whole action on one real server.
	Timeout time.Duration
	Paths   Paths
	// Dial opens the TCP connection; a net.Dialer when nil.
	Dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	Logger *slog.Logger
	Now    func() time.Time
	// Done, if set, hears of each real server as it is finished (progress),
	// from several goroutines at once.
	Done func(Result)
}

// Pusher prepares, verifies and restores real servers over SSH by running
// the rendered scripts there.
type Pusher struct {
	cfg SSHConfig
	// knownHostsMu serialises reading and appending known_hosts.
	knownHostsMu sync.Mutex
}

// NewPusher checks cfg and fills its defaults.
func NewPusher(cfg SSHConfig) (*Pusher, error) {
	if cfg.User == "" {
		return nil, errors.New("ssh user: missing")
	}
	if len(cfg.Signers) == 0 {
		return nil, errors.New("ssh identity: no private key")
	}
	if cfg.KnownHostsFile == "" {
		return nil, errors.New("known_hosts file: missing")
	}
	switch cfg.Sudo {
	case "":
		cfg.Sudo = SudoAuto
	case SudoAuto, SudoAlways, SudoNever:
	default:
		return nil, fmt.Errorf("sudo: %q: want auto, always or never", cfg.Sudo)
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 8
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if err := cfg.Paths.validate(); err != nil {
		return nil, err
	}
	if cfg.Dial == nil {
		d := &net.Dialer{}
		cfg.Dial = d.DialContext
	}
	if cfg.Logger == nil {
		return nil, errors.New("logger: missing")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Pusher{cfg: cfg}, nil
}

// LoadSigner reads an unencrypted private key (OpenSSH or PEM format).
func LoadSigner(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read ssh identity: %w", err)
	}
	s, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("parse ssh identity %s: %w", path, err)
	}
	return s, nil
}

// Push prepares each target and then reads its state back.
func (p *Pusher) Push(ctx context.Context, targets []Target) []Result {
	return p.each(ctx, "push", targets, p.push)
}

// Verify reads each target's state back and reports drift.
func (p *Pusher) Verify(ctx context.Context, targets []Target) []Result {
	return p.each(ctx, "verify", targets, p.verify)
}

// Undo reverts on each target what its journal records; only the
// address of the target is used.
func (p *Pusher) Undo(ctx context.Context, targets []Target) []Result {
	return p.each(ctx, "undo", targets, p.undo)
}

func (p *Pusher) each(ctx context.Context, action string, targets []Target, fn func(context.Context, *ssh.Client, Target, *Result) error) []Result {
	results := make([]Result, len(targets))
	sem := make(chan struct{}, p.cfg.Parallel)
	var wg sync.WaitGroup
	for i, t := range targets {
		results[i] = Result{Target: t.Label(), Host: t.SSHAddress(), Action: action}
		wg.Go(func() {
			r := &results[i]
			defer func() {
				r.At = p.cfg.Now().UTC()
				if p.cfg.Done != nil {
					p.cfg.Done(*r)
				}
			}()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				r.State, r.Detail = StateFailed, fmt.Sprintf("not started: %v", ctx.Err())
				return
			}
			tctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
			defer cancel()
			client, err := p.connect(tctx, t.SSHAddress())
			if err != nil {
				r.State, r.Detail = classify(err), err.Error()
				p.cfg.Logger.Warn("real server not reached", "action", action, "target", r.Target, "err", err)
				return
			}
			defer client.Close()
			if err := fn(tctx, client, t, r); err != nil {
				r.State, r.Detail = StateFailed, err.Error()
			}
			p.cfg.Logger.Info("real server done", "action", action, "target", r.Target, "result", r.Summary(), "changed", len(r.Changed))
		})
	}
	wg.Wait()
	return results
}

// errUnreachable marks failures to reach the SSH port at all.
var errUnreachable = errors.New("unreachable")

func classify(err error) State {
	if errors.Is(err, errUnreachable) {
		return StateUnreachable
	}
	return StateFailed
}

func (p *Pusher) connect(ctx context.Context, addr string) (*ssh.Client, error) {
	conn, err := p.cfg.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUnreachable, err)
	}
	callback, algos, err := p.hostKeyCheck(addr)
	if err != nil {
		conn.Close()
		return nil, err
	}
	cfg := &ssh.ClientConfig{
		User:              p.cfg.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(p.cfg.Signers...)},
		HostKeyCallback:   callback,
		HostKeyAlgorithms: algos,
	}
	// The handshake takes no context: bound it by the connection's deadline.
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	stop()
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: ssh handshake with %s: %w", errUnreachable, addr, ctx.Err())
		}
		return nil, fmt.Errorf("ssh handshake with %s: %w", addr, err)
	}
	conn.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), nil
}

// hostKeyCheck returns the known_hosts callback for addr and the host key
// algorithms to ask for: those of the keys known for addr, so that a server
// offering several key types is not taken for one whose key changed.
func (p *Pusher) hostKeyCheck(addr string) (ssh.HostKeyCallback, []string, error) {
	p.knownHostsMu.Lock()
	defer p.knownHostsMu.Unlock()
	check, err := p.knownHosts()
	if err != nil {
		return nil, nil, err
	}
	var algos []string
	probe, _ := ssh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))
	var ke *knownhosts.KeyError
	if err := check(addr, fakeAddr(addr), probe); errors.As(err, &ke) {
		for _, k := range ke.Want {
			switch t := k.Key.Type(); t {
			case ssh.KeyAlgoRSA:
				algos = append(algos, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
			default:
				algos = append(algos, t)
			}
		}
	}
	callback := func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		p.knownHostsMu.Lock()
		defer p.knownHostsMu.Unlock()
		check, err := p.knownHosts()
		if err != nil {
			return err
		}
		err = check(hostname, remote, key)
		var ke *knownhosts.KeyError
		switch {
		case err == nil:
			return nil
		case !errors.As(err, &ke):
			return fmt.Errorf("check host key of %s: %w", hostname, err)
		case len(ke.Want) > 0:
			return fmt.Errorf("host key of %s changed: it offered %s, %s:%d holds another; refused (if the real server was reinstalled, remove the old key with ssh-keygen -R and push again)",
				hostname, ssh.FingerprintSHA256(key), ke.Want[0].Filename, ke.Want[0].Line)
		case !p.cfg.AcceptNewHostKeys:
			return fmt.Errorf("host key of %s unknown (%s %s): refused; add it to %s or accept new host keys explicitly",
				hostname, key.Type(), ssh.FingerprintSHA256(key), p.cfg.KnownHostsFile)
		}
		line := knownhosts.Line([]string{knownhosts.Normalize(hostname)}, key)
		f, err := os.OpenFile(p.cfg.KnownHostsFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("record host key of %s: %w", hostname, err)
		}
		_, werr := f.WriteString(line + "\n")
		if err := errors.Join(werr, f.Close()); err != nil {
			return fmt.Errorf("record host key of %s in %s: %w", hostname, p.cfg.KnownHostsFile, err)
		}
		p.cfg.Logger.Warn("new host key accepted", "host", hostname, "fingerprint", ssh.FingerprintSHA256(key), "known_hosts", p.cfg.KnownHostsFile)
		return nil
	}
	return callback, algos, nil
}

func (p *Pusher) knownHosts() (ssh.HostKeyCallback, error) {
	if _, err := os.Stat(p.cfg.KnownHostsFile); errors.Is(err, fs.ErrNotExist) && p.cfg.AcceptNewHostKeys {
		if err := os.WriteFile(p.cfg.KnownHostsFile, nil, 0o600); err != nil {
			return nil, fmt.Errorf("create known_hosts: %w", err)
		}
	}
	check, err := knownhosts.New(p.cfg.KnownHostsFile)
	if err != nil {
		return nil, fmt.Errorf("read known_hosts: %w", err)
	}
	return check, nil
}

// fakeAddr gives knownhosts a remote address for a lookup made before dialling.
func fakeAddr(hostport string) net.Addr {
	host, port, _ := net.SplitHostPort(hostport)
	n, _ := strconv.Atoi(port)
	return &net.TCPAddr{IP: net.ParseIP(host), Port: n}
}

// run feeds script to sh on the real server, through sudo when needed.
func (p *Pusher) run(ctx context.Context, c *ssh.Client, script string) (stdout string, err error) {
	s, err := c.NewSession()
	if err != nil {
		return "", fmt.Errorf("open ssh session: %w", err)
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	var out, errOut bytes.Buffer
	s.Stdin, s.Stdout, s.Stderr = strings.NewReader(script), &out, &errOut
	cmd := p.remoteCommand()
	if err := s.Run(cmd); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		msg := strings.TrimSpace(errOut.String())
		if len(msg) > 500 {
			msg = "..." + msg[len(msg)-500:]
		}
		if msg != "" {
			return out.String(), fmt.Errorf("run %s: %w: %s", cmd, err, msg)
		}
		return out.String(), fmt.Errorf("run %s: %w", cmd, err)
	}
	return out.String(), nil
}

// remoteCommand reads the script from stdin; sudo -n fails at once rather
// than wait for a password nobody will type.
func (p *Pusher) remoteCommand() string {
	if p.cfg.Sudo == SudoAlways || p.cfg.Sudo == SudoAuto && p.cfg.User != "root" {
		return "sudo -n sh -s"
	}
	return "sh -s"
}

func (p *Pusher) push(ctx context.Context, c *ssh.Client, t Target, r *Result) error {
	steps, err := Plan(t, p.cfg.Paths)
	if err != nil {
		return err
	}
	out, err := p.run(ctx, c, RenderApply(t, steps, p.cfg.Paths))
	r.Changed = prefixedLines(out, "changed: ")
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	return p.readBack(ctx, c, t, steps, r)
}

func (p *Pusher) verify(ctx context.Context, c *ssh.Client, t Target, r *Result) error {
	steps, err := Plan(t, p.cfg.Paths)
	if err != nil {
		return err
	}
	return p.readBack(ctx, c, t, steps, r)
}

func (p *Pusher) readBack(ctx context.Context, c *ssh.Client, t Target, steps []Step, r *Result) error {
	out, err := p.run(ctx, c, RenderVerify(t, steps))
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	drift, err := parseVerify(out, steps)
	if err != nil {
		return err
	}
	r.State, r.Drift = StatePrepared, nil
	for _, s := range drift {
		r.State = StateDrift
		r.Drift = append(r.Drift, s.Drift())
	}
	return nil
}

func (p *Pusher) undo(ctx context.Context, c *ssh.Client, t Target, r *Result) error {
	out, err := p.run(ctx, c, RenderUndo(p.cfg.Paths))
	r.Changed = prefixedLines(out, "undone: ")
	if err != nil {
		return fmt.Errorf("undo: %w", err)
	}
	r.State = StateUndone
	return nil
}

// parseVerify maps the verify script's "ok N" / "drift N" lines to the
// steps not in effect; every step must be accounted for.
func parseVerify(out string, steps []Step) ([]Step, error) {
	seen := make([]bool, len(steps))
	var drift []Step
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		word, num, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || n < 1 || n > len(steps) || (word != "ok" && word != "drift") {
			continue
		}
		seen[n-1] = true
		if word == "drift" {
			drift = append(drift, steps[n-1])
		}
	}
	for i, s := range seen {
		if !s {
			return nil, fmt.Errorf("verify: no answer for step %d (%s)", i+1, steps[i])
		}
	}
	return drift, nil
}

func prefixedLines(out, prefix string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			lines = append(lines, rest)
		}
	}
	return lines
}
