package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/realserver"
)

const realserverTuneUsage = "usage: ipvsctl realserver tune check|push|undo [--rip IP[,IP...]] [--port N[,N...]] [--apply] [ssh flags]\n" +
	"\nThe real servers' settings for a busy director over SSH: their TCP settings (somaxconn, tcp_max_syn_backlog,\n" +
	"ip_local_port_range, tcp_max_tw_buckets, tcp_rmem/tcp_wmem), the host-wide buffer caps, input queue and file\n" +
	"limits (rmem_max/wmem_max, netdev_max_backlog, fs.file-max, fs.nr_open), the application's listen backlog and its\n" +
	"open-files limit, and the nginx and HAProxy running there (their own dump of their configuration, against their\n" +
	"manuals, each finding at its file and line): check reads them, push raises the sysctls below their floor (now and\n" +
	"in sysctl.d, recording what it replaced) and with --apply writes an nginx drop-in (nginx -t, then a reload), undo\n" +
	"puts that back; each run is audited. Run 'ipvsctl realserver tune --help' for the flags."

func runRealserverTune(env *cliEnv, args []string) int {
	args = moveGlobalFlags(args)
	// The sub-verb comes first; the flags after it (Go's flag package stops at a word).
	verb := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		verb, args = args[0], args[1:]
	}
	const name = "realserver tune"
	fs, g := env.newFlagSet(name, "check|push|undo [--rip IP[,IP...]] [--port N[,N...]] [--apply] [--ssh-port N] [ssh flags]",
		"Over SSH, the real servers' settings for a busy director: their TCP settings (somaxconn,\n"+
			"tcp_max_syn_backlog, ip_local_port_range, tcp_max_tw_buckets, tcp_rmem/tcp_wmem), the host-wide buffer caps,\n"+
			"input queue and file limits (net.core.rmem_max/wmem_max, netdev_max_backlog, fs.file-max, fs.nr_open; a real\n"+
			"server that is a namespace which does not see one is told it is its host's), the application's listen backlog\n"+
			"(ss -lnt Send-Q) and its open-files limit; and each nginx and HAProxy running there, found by its process: nginx -T\n"+
			"(haproxy -c and its -f files) held against nginx.org's and HAProxy's manuals, each finding at its file:line.\n"+
			"check reads them (exit 1 unless all are fine); push raises the sysctls below their floor, now and in sysctl.d,\n"+
			"recording what it replaced (idempotent), then reads everything back; push --apply also writes what may be written\n"+
			"safely for the web servers (an nginx drop-in under the directory its http block includes, kept only if nginx -t\n"+
			"passes, then a reload; where systemd runs the server in its own unit, LimitNOFILE= in a drop-in of it, for its\n"+
			"next restart); the rest is advice. undo puts the recorded values and files back, byte for byte. Without\n"+
			"--rip, every real server of the stored state. Each run is audited (realserver tune check|push|push --apply|undo);\n"+
			"with --server the daemon logs in with its own SSH settings.")
	rips := fs.String("rip", "", "real server address(es), comma-separated (default: every real server of the stored state)")
	sshPort := fs.Int("ssh-port", 22, "SSH port of the real servers")
	ports := fs.String("port", "", "the application's port(s) whose listen backlog is checked (default: every listener but SSH's)")
	apply := fs.Bool("apply", false, "with push: also write the web servers' drop-ins (nginx's, validated by nginx -t before the reload; a systemd unit's LimitNOFILE=); without it their findings are advice")
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
	req, err := tuneRequest(*rips, *sshPort, *ports)
	if err != nil {
		return env.fail(name, err, true)
	}
	if *apply && verb != "push" {
		return env.fail(name, fmt.Errorf("--apply goes with push only"), true)
	}
	req.Apply = *apply
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	actor := server.Actor{Name: env.author(), Via: "cli"}
	var rep *server.RealServerTuneReport
	if g.server != "" {
		c, err := remoteSSH(fs, g, "ssh-port")
		if err != nil {
			return env.fail(name, err, true)
		}
		if rep, err = c.TuneRealServers(ctx, actor, verb, req); err != nil {
			return env.fail(name, err, false)
		}
		return env.printRealserverTune(name, verb, rep, *asJSON)
	}
	return env.tuneFromHere(ctx, name, g.db, sf, actor, verb, req, *asJSON)
}

// tuneRequest is what the flags ask of realserver tune: the real servers
// (none: those of the stored state) and the application's ports.
func tuneRequest(rips string, sshPort int, ports string) (server.RealServerTuneRequest, error) {
	var req server.RealServerTuneRequest
	if rips != "" {
		targets, err := realserver.TargetList{RIPs: splitList(rips), SSHPort: sshPort, Mode: "dr-sysctl"}.Targets(false)
		if err != nil {
			return req, err
		}
		req.Targets = targets
	}
	for _, s := range splitList(ports) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 65535 {
			return req, fmt.Errorf("port: %q is not a port 1..65535", s)
		}
		req.Ports = append(req.Ports, n)
	}
	return req, nil
}

// tuneFromHere runs realserver tune from this machine, with its SSH settings,
// audited in the state database at db when it can be opened.
func (e *cliEnv) tuneFromHere(ctx context.Context, name, db string, sf *sshFlags, actor server.Actor, verb string, req server.RealServerTuneRequest, asJSON bool) int {
	log := e.logger(levelWarn)
	cfg, err := sf.config(log)
	if err != nil {
		return e.fail(name, err, true)
	}
	// The run is audited in the state database; without it (and with --rip) the real servers are still tuned.
	core, open, closeDB := sshCore(ctx, db, log, cfg)
	defer closeDB()
	if open != nil {
		if len(req.Targets) == 0 {
			return e.fail(name, fmt.Errorf("no --rip, and the stored state's real servers cannot be read: %w", open), false)
		}
		log.Error("the run is not audited", "err", open)
	}
	rep, err := core.TuneRealServers(ctx, actor, verb, req)
	if err != nil {
		return e.fail(name, err, false)
	}
	return e.printRealserverTune(name, verb, rep, asJSON)
}

// printRealserverTune prints each real server's result and its findings
// (--json: the results); the exit status is 1 unless every one is fine (or
// undone) and none was left out.
func (e *cliEnv) printRealserverTune(name, verb string, rep *server.RealServerTuneReport, asJSON bool) int {
	rs := rep.Results
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
		for _, sk := range rep.Skipped {
			fmt.Fprintf(e.stdout, "%s: left out: %s\n", sk.RIP, sk.Problem)
		}
	}
	for _, r := range rs {
		if !r.OK() {
			return exitFail
		}
	}
	if len(rep.Skipped) > 0 {
		return exitFail
	}
	return exitOK
}
