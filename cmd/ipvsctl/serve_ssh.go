package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os/user"
	"path/filepath"
	"time"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/server"
	"golang.org/x/crypto/ssh"
)

// serveSSHFlags are how the daemon logs in to real servers to verify them
// (the panel's Verify buttons, POST /api/v1/realservers/verify): the
// realserver verbs' SSH flags, with their defaults, under --ssh-*.
type serveSSHFlags struct {
	identity, user, knownHosts, sudo string
	timeout                          time.Duration
}

func (f *serveSSHFlags) register(fs *flag.FlagSet, home string) {
	fs.StringVar(&f.identity, "ssh-identity", filepath.Join(home, ".ssh", "id_ed25519"),
		"SSH private key (unencrypted) for verifying real servers from the panel and the API (\"\" for none)")
	fs.StringVar(&f.user, "ssh-user", "root", "SSH user on the real servers; scripts run through sudo -n when it is not root")
	fs.StringVar(&f.knownHosts, "ssh-known-hosts", filepath.Join(home, ".ssh", "known_hosts"), "known_hosts file with the real servers' host keys")
	fs.StringVar(&f.sudo, "ssh-sudo", "auto", "auto (when --ssh-user is not root), always or never")
	fs.DurationVar(&f.timeout, "ssh-timeout", 2*time.Minute, "time allowed per real server")
}

// enableHint is how to give the daemon an identity.
const enableHint = "start ipvsctl serve with --ssh-identity FILE (a private key the real servers accept; under systemd, " +
	"outside /root, which the unit hides) to verify real servers from the panel and the API"

// config loads the identity. A key named with --ssh-identity must load; the
// default one may be missing, which leaves verifying off, saying how to turn it on.
func (f *serveSSHFlags) config(fs *flag.FlagSet, log *slog.Logger) (server.RealServerSSH, error) {
	switch arpguard.SudoMode(f.sudo) {
	case arpguard.SudoAuto, arpguard.SudoAlways, arpguard.SudoNever:
	default:
		return server.RealServerSSH{}, fmt.Errorf("ssh-sudo: %q: want auto, always or never", f.sudo)
	}
	if f.timeout <= 0 {
		return server.RealServerSSH{}, fmt.Errorf("ssh-timeout: %s: must be positive", f.timeout)
	}
	if f.identity == "" {
		return server.RealServerSSH{Unavailable: "verifying real servers is off (--ssh-identity \"\"): " + enableHint}, nil
	}
	signer, err := arpguard.LoadSigner(f.identity)
	if err != nil {
		if flagsGiven(fs)["ssh-identity"] {
			return server.RealServerSSH{}, fmt.Errorf("ssh-identity: %w", err)
		}
		log.Info("real servers cannot be verified from the panel: no SSH identity", "err", err)
		return server.RealServerSSH{Unavailable: fmt.Sprintf("no SSH identity for real servers (%v): %s", err, enableHint)}, nil
	}
	log.Info("real servers verified over SSH", "identity", f.identity, "user", f.user, "known_hosts", f.knownHosts)
	return server.RealServerSSH{SSHConfig: arpguard.SSHConfig{
		User: f.user, Signers: []ssh.Signer{signer}, KnownHostsFile: f.knownHosts, Sudo: arpguard.SudoMode(f.sudo),
		Timeout: f.timeout, Paths: arpguard.DefaultPaths(), Logger: log,
	}}, nil
}

// homeDir is the home of the user the daemon runs as: $HOME, which a
// system service may lack, else the password database's.
func homeDir(env *cliEnv) string {
	if h := env.getenv("HOME"); h != "" {
		return h
	}
	if u, err := user.Current(); err == nil && u.HomeDir != "" {
		return u.HomeDir
	}
	return "/root"
}
