package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
	"github.com/ipvsctl/ipvsctl/server/realserver"
	"golang.org/x/crypto/ssh"
)

const realserverTuneUsage = "usage: ipvsctl realserver tune check|push|undo --rip IP[,IP...] [--port N[,N...]] [ssh flags]\n" +
	"\nThe real servers' TCP settings for a busy director over SSH (somaxconn, tcp_max_syn_backlog,\n" +
	"ip_local_port_range, tcp_max_tw_buckets, tcp_rmem/tcp_wmem), the application's listen backlog and its\n" +
	"open-files limit: check reads them, push raises those below their floor (now and in sysctl.d, recording\n" +
	"what it replaced), undo puts that back. Run 'ipvsctl realserver tune --help' for the flags."

func runRealserverTune(env *cliEnv, args []string) int {
	args = moveGlobalFlags(args)
	// The sub-verb comes first; the flags after it (Go's flag package stops at a word).
	verb := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		verb, args = args[0], args[1:]
	}
	const name = "realserver tune"
	fs, _ := env.newFlagSet(name, "check|push|undo --rip IP[,IP...] [--port N[,N...]] [--ssh-port N] [ssh flags]",
		"Over SSH, the real servers' TCP settings for a busy director (somaxconn, tcp_max_syn_backlog,\n"+
			"ip_local_port_range, tcp_max_tw_buckets, tcp_rmem/tcp_wmem), the application's listen backlog (ss -lnt\n"+
			"Send-Q) and its open-files limit. check reads them (exit 1 unless all are fine); push raises those below\n"+
			"their floor, now and in sysctl.d, recording what it replaced (idempotent), then reads them back; undo\n"+
			"puts the recorded values back and removes the files.")
	rips := fs.String("rip", "", "real server address(es), comma-separated")
	sshPort := fs.Int("ssh-port", 22, "SSH port of the real servers")
	ports := fs.String("port", "", "the application's port(s) whose listen backlog is checked (default: every listener but SSH's)")
	sf := addSSHFlags(fs, env.getenv("HOME"))
	asJSON := fs.Bool("json", false, "print JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	switch verb {
	case "check", "push", "undo":
	case "", "help":
		fmt.Fprintln(env.stderr, realserverTuneUsage)
		return exitUsage
	default:
		fmt.Fprintf(env.stderr, "ipvsctl realserver tune: unknown verb %q (want check, push or undo)\n", verb)
		return exitUsage
	}
	if fs.NArg() > 0 {
		return env.fail(name, fmt.Errorf("unexpected argument %q", fs.Arg(0)), true)
	}
	targets, err := realserver.TargetList{RIPs: splitList(*rips), SSHPort: *sshPort, Mode: "dr-sysctl"}.Targets(false)
	if err != nil {
		return env.fail(name, err, true)
	}
	var portList []int
	for _, s := range splitList(*ports) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 65535 {
			return env.fail(name, fmt.Errorf("port: %q is not a port 1..65535", s), true)
		}
		portList = append(portList, n)
	}
	signer, err := arpguard.LoadSigner(*sf.identity)
	if err != nil {
		return env.fail(name, err, true)
	}
	log := slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := arpguard.NewPusher(arpguard.SSHConfig{
		User: *sf.user, Signers: []ssh.Signer{signer}, KnownHostsFile: *sf.knownHosts, AcceptNewHostKeys: *sf.acceptNew,
		Sudo: arpguard.SudoMode(*sf.sudo), Parallel: *sf.parallel, Timeout: *sf.timeout, Paths: arpguard.DefaultPaths(), Logger: log,
	})
	if err != nil {
		return env.fail(name, err, true)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var rs []arpguard.TuneResult
	switch verb {
	case "check":
		rs = p.TuneCheck(ctx, targets, portList)
	case "push":
		rs = p.TunePush(ctx, targets, portList)
	case "undo":
		rs = p.TuneUndo(ctx, targets)
	}
	return env.printRealserverTune(name, verb, rs, *asJSON)
}

// printRealserverTune prints each real server's result and its findings;
// the exit status is 1 unless every one is fine (or undone).
func (e *cliEnv) printRealserverTune(name, verb string, rs []arpguard.TuneResult, asJSON bool) int {
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rs); err != nil {
			return e.fail(name, err, false)
		}
	} else {
		for i, r := range rs {
			if i > 0 {
				fmt.Fprintln(e.stdout)
			}
			state := string(r.State)
			if r.State == arpguard.StatePrepared {
				state = "tuned"
			} else if r.State == arpguard.StateDrift {
				state = "to change"
			} else if r.Detail != "" {
				state += ": " + r.Detail
			}
			fmt.Fprintf(e.stdout, "%s (%s): %s\n", r.Target, r.Host, state)
			for _, c := range r.Changed {
				fmt.Fprintf(e.stdout, "  %s: %s\n", map[string]string{"push": "changed", "undo": "undone"}[verb], c)
			}
			if len(r.Findings) > 0 {
				e.printFindings(r.Findings)
				fmt.Fprintln(e.stdout, tune.Summary(r.Findings))
			}
		}
	}
	for _, r := range rs {
		if !r.OK() {
			return exitFail
		}
	}
	return exitOK
}
