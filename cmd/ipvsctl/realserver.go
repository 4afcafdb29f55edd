package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/client"
	"github.com/ipvsctl/ipvsctl/server/realserver"
	"github.com/ipvsctl/ipvsctl/server/store"
	"golang.org/x/crypto/ssh"
)

const realserverUsage = `usage: ipvsctl realserver push|verify|undo|script|apply|tune [flags]

Prepare LVS real servers for the director's forwarding method (ARP hiding for
direct routing, IPIP for tunnelling, routes back through the director for NAT),
persistently across their reboots, and reversibly.

  push     prepare real servers over SSH, then read their state back
  verify   read real servers' state back over SSH: prepared, drift or unreachable
  undo     remove over SSH exactly what push added
  script   print the shell script, for an operator who will not let a tool log in
  apply    prepare (or --undo) the machine ipvsctl runs on, without a shell
  tune     check|push|undo the real servers' TCP settings for a busy director, over SSH

Run 'ipvsctl realserver VERB --help' for a verb's flags.
`

func runRealserver(env *cliEnv, args []string) int {
	verb, rest, code, ok := env.subVerb(realserverUsage, args)
	if !ok {
		return code
	}
	switch verb {
	case "push", "verify", "undo":
		return runRealserverSSH(env, verb, rest)
	case "tune":
		return runRealserverTune(env, rest)
	case "script":
		return runRealserverScript(env, rest)
	case "apply":
		return runRealserverApply(env, rest)
	}
	return env.unknownSubVerb("realserver", verb)
}

// targetFlags describe real servers on the command line: one target per RIP,
// all with the same VIPs and mode, or a JSON file of targets.
type targetFlags struct {
	file, rips, vips, mode, iface, gateway, route, clients *string
	port                                                   *int
}

func addTargetFlags(fs *flag.FlagSet) *targetFlags {
	return &targetFlags{
		file:    fs.String("targets", "", "JSON file with a list of targets (instead of --rip/--vip/...)"),
		rips:    fs.String("rip", "", "real server address(es), comma-separated"),
		port:    fs.Int("ssh-port", 22, "SSH port of the real servers"),
		vips:    fs.String("vip", "", "VIP(s) the real servers serve, comma-separated"),
		mode:    fs.String("mode", "dr-sysctl", "dr-sysctl, dr-arptables, tun or nat"),
		iface:   fs.String("interface", "eth0", "the real servers' interface holding the RIP"),
		gateway: fs.String("gateway", "", "nat: the director's address on the real servers' network"),
		route:   fs.String("route", "default", "nat: default (default route via --gateway) or host (--client-prefix routes only)"),
		clients: fs.String("client-prefix", "", "nat with --route host: client prefixes routed via --gateway, comma-separated"),
	}
}

// targets builds the targets; validate is false for undo, which needs only addresses.
func (f *targetFlags) targets(validate bool) ([]arpguard.Target, error) {
	if *f.file != "" {
		b, err := os.ReadFile(*f.file)
		if err != nil {
			return nil, fmt.Errorf("read targets: %w", err)
		}
		return realserver.ParseTargets(*f.file, b, validate)
	}
	return realserver.TargetList{
		RIPs: splitList(*f.rips), VIPs: splitList(*f.vips), SSHPort: *f.port, Mode: *f.mode, Interface: *f.iface,
		Gateway: *f.gateway, Route: *f.route, ClientPrefixes: splitList(*f.clients),
	}.Targets(validate)
}

func parseAddrs(field, s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, v := range splitList(s) {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an address", field, v)
		}
		out = append(out, a)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// sshFlags are how the realserver verbs log in to real servers from this machine.
type sshFlags struct {
	user, identity, knownHosts, sudo *string
	acceptNew                        *bool
	parallel                         *int
	timeout                          *time.Duration
}

// sshFlagNames are the flags that act on this machine's SSH only.
var sshFlagNames = []string{"user", "identity", "known-hosts", "accept-new-host-key", "sudo", "parallel", "timeout"}

func addSSHFlags(fs *flag.FlagSet, home string) *sshFlags {
	return &sshFlags{
		user:       fs.String("user", "root", "SSH user; scripts run through sudo -n when it is not root"),
		identity:   fs.String("identity", filepath.Join(home, ".ssh", "id_ed25519"), "SSH private key (unencrypted)"),
		knownHosts: fs.String("known-hosts", filepath.Join(home, ".ssh", "known_hosts"), "known_hosts file with the real servers' host keys"),
		acceptNew:  fs.Bool("accept-new-host-key", false, "record host keys not yet in known_hosts (a changed key is still refused)"),
		sudo:       fs.String("sudo", "auto", "auto (when --user is not root), always or never"),
		parallel:   fs.Int("parallel", 8, "how many real servers at once"),
		timeout:    fs.Duration("timeout", 2*time.Minute, "time allowed per real server"),
	}
}

func runRealserverSSH(env *cliEnv, verb string, args []string) int {
	name := "realserver " + verb
	summary := map[string]string{
		"push":   "Prepare each real server over SSH (idempotent: a second push changes nothing), then read its state back.",
		"verify": "Read each real server's state back over SSH and report prepared, drift or unreachable; the result is stored.",
		"undo":   "Remove over SSH exactly what push added on each real server, as recorded in its journal.",
	}[verb]
	fs, g := env.newFlagSet(name, "--rip IP[,IP...] --vip VIP[,VIP...] [--mode MODE] [flags] | --targets FILE", summary)
	tf := addTargetFlags(fs)
	sf := addSSHFlags(fs, env.getenv("HOME"))
	asJSON := fs.Bool("json", false, "print JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		return env.fail(name, fmt.Errorf("unexpected argument %q", fs.Arg(0)), true)
	}
	targets, err := tf.targets(verb != "undo")
	if err != nil {
		return env.fail(name, err, true)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	actor := server.Actor{Name: env.author(), Via: "cli"}
	sel := server.RealServerSelection{Targets: targets}
	var rep *server.RealServerReport
	if g.server != "" {
		c, err := remoteSSH(fs, g)
		if err != nil {
			return env.fail(name, err, true)
		}
		if rep, err = c.PrepareRealServers(ctx, actor, verb, sel); err != nil {
			return env.fail(name, err, false)
		}
	} else {
		log := env.logger(levelWarn)
		cfg, err := sf.config(log)
		if err != nil {
			return env.fail(name, err, true)
		}
		cfg.Done = env.countDone(verb, len(targets), *asJSON)
		// The last result per real server is kept in the state database, for status and the panel;
		// without the database the real servers are still prepared.
		core, open, closeDB := sshCore(ctx, g.db, log, cfg)
		defer closeDB()
		if open != nil {
			log.Error("results not stored", "err", open)
		}
		rep, err = core.PrepareRealServers(ctx, actor, verb, sel)
		env.clearLine()
		if err != nil {
			return env.fail(name, err, false)
		}
	}
	return env.printPrepResults(name, rep.Results, *asJSON)
}

// remoteSSH is the client of --server's daemon for a verb that logs in to
// real servers. The daemon logs in with its own settings (serve --ssh-*):
// this machine's (sshFlagNames, and the extra ones) do not travel, and
// given, they are refused.
func remoteSSH(fs *flag.FlagSet, g *globalFlags, extra ...string) (*client.Client, error) {
	given := flagsGiven(fs)
	for _, f := range append(extra, sshFlagNames...) {
		if given[f] {
			return nil, fmt.Errorf("--%s: with --server the daemon logs in to real servers with its own SSH settings (ipvsctl serve --ssh-*)", f)
		}
	}
	return client.NewRemote(g.server, g.token, g.caCert)
}

// config is how this machine logs in to real servers, from the flags.
func (sf *sshFlags) config(log *slog.Logger) (arpguard.SSHConfig, error) {
	signer, err := arpguard.LoadSigner(*sf.identity)
	if err != nil {
		return arpguard.SSHConfig{}, err
	}
	return arpguard.SSHConfig{User: *sf.user, Signers: []ssh.Signer{signer}, KnownHostsFile: *sf.knownHosts, AcceptNewHostKeys: *sf.acceptNew,
		Sudo: arpguard.SudoMode(*sf.sudo), Parallel: *sf.parallel, Timeout: *sf.timeout, Paths: arpguard.DefaultPaths(), Logger: log}, nil
}

// sshCore is a core over the state database at db with this machine's SSH
// settings for real servers (the realserver verbs without --server). When
// the database cannot be opened the core has none (open says why): the
// real servers are still worked on, nothing is stored or audited.
func sshCore(ctx context.Context, db string, log *slog.Logger, cfg arpguard.SSHConfig) (core *server.Core, open error, closeDB func()) {
	st, err := store.Open(ctx, db)
	if err != nil {
		return server.New(server.Config{Log: log, RealServerSSH: server.RealServerSSH{SSHConfig: cfg}}), err, func() {}
	}
	return server.New(server.Config{Store: st, Log: log, RealServerSSH: server.RealServerSSH{SSHConfig: cfg}}), nil, func() { st.Close() }
}

// printPrepResults prints a result per real server; the exit status is 1
// unless every one did what was asked.
func (e *cliEnv) printPrepResults(name string, rs []arpguard.Result, asJSON bool) int {
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rs); err != nil {
			return e.fail(name, err, false)
		}
	} else {
		tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "REAL SERVER\tHOST\tRESULT\tCHANGED")
		for _, r := range rs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", r.Target, r.Host, r.Summary(), len(r.Changed))
		}
		tw.Flush()
	}
	for _, r := range rs {
		if !r.OK() {
			return exitFail
		}
	}
	return exitOK
}

func runRealserverScript(env *cliEnv, args []string) int {
	const name = "realserver script"
	fs, _ := env.newFlagSet(name, "--rip IP --vip VIP[,VIP...] [--mode MODE] [flags] | --undo",
		"Print the shell script that prepares one real server (run it there as root with sh), the\n"+
			"read-only script that checks it (--verify), or the one that undoes a preparation (--undo).")
	tf := addTargetFlags(fs)
	undo := fs.Bool("undo", false, "print the undo script (needs no target)")
	verify := fs.Bool("verify", false, "print the read-only verify script")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		return env.fail(name, fmt.Errorf("unexpected argument %q", fs.Arg(0)), true)
	}
	paths := arpguard.DefaultPaths()
	if *undo {
		fmt.Fprint(env.stdout, arpguard.RenderUndo(paths))
		return exitOK
	}
	ts, err := tf.targets(true)
	if err != nil {
		return env.fail(name, err, true)
	}
	if len(ts) != 1 {
		return env.fail(name, fmt.Errorf("rip: one real server at a time, got %d", len(ts)), true)
	}
	steps, err := arpguard.Plan(ts[0], paths)
	if err != nil {
		return env.fail(name, err, true)
	}
	if *verify {
		fmt.Fprint(env.stdout, arpguard.RenderVerify(ts[0], steps))
	} else {
		fmt.Fprint(env.stdout, arpguard.RenderApply(ts[0], steps, paths))
	}
	return exitOK
}

// localFlags describe the one real server realserver apply prepares: this machine.
type localFlags struct {
	vips, mode, iface, rip, gateway, route, clients *string
}

func runRealserverApply(env *cliEnv, args []string) int {
	const name = "realserver apply"
	fs, _ := env.newFlagSet(name, "--vip VIP[,VIP...] --mode dr-sysctl|dr-arptables|tun|nat [--gateway IP] [--undo]",
		"Prepare the machine ipvsctl runs on as a real server, with netlink and /proc/sys (no shell;\n"+
			"arptables and modprobe run as commands), or undo exactly what an earlier preparation added.")
	f := localFlags{
		vips:    fs.String("vip", "", "VIP(s) this real server serves, comma-separated"),
		mode:    fs.String("mode", "dr-sysctl", "dr-sysctl, dr-arptables, tun or nat"),
		iface:   fs.String("interface", "", "interface holding the RIP (default: that of the IPv4 default route)"),
		rip:     fs.String("rip", "", "this real server's address (default: the interface's first global address)"),
		gateway: fs.String("gateway", "", "nat: the director's address on this network"),
		route:   fs.String("route", "default", "nat: default or host"),
		clients: fs.String("client-prefix", "", "nat with --route host: client prefixes, comma-separated"),
	}
	undo := fs.Bool("undo", false, "undo what an earlier apply or push added")
	check := fs.Bool("check", false, "only report whether this machine is prepared")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		return env.fail(name, fmt.Errorf("unexpected argument %q", fs.Arg(0)), true)
	}
	log := slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	sys, err := arpguard.NewNetlinkSystem()
	if err != nil {
		return env.fail(name, err, false)
	}
	defer sys.Close()
	l := &arpguard.Local{Sys: sys, Paths: arpguard.DefaultPaths(), Logger: log}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *undo {
		undone, err := l.Undo(ctx)
		for _, u := range undone {
			fmt.Fprintln(env.stdout, "undone:", u)
		}
		if err != nil {
			return env.fail(name, err, false)
		}
		return exitOK
	}
	t, err := f.target(sys)
	if err != nil {
		return env.fail(name, err, true)
	}
	steps, err := arpguard.Plan(t, l.Paths)
	if err != nil {
		return env.fail(name, err, true)
	}
	if *check {
		return env.checkLocal(ctx, name, l, steps)
	}
	changed, err := l.Apply(ctx, steps)
	for _, s := range changed {
		fmt.Fprintln(env.stdout, "changed:", s)
	}
	if err != nil {
		return env.fail(name, err, false)
	}
	if len(changed) == 0 {
		fmt.Fprintln(env.stdout, "already prepared: nothing changed")
	}
	return exitOK
}

// target builds this machine's target, asking sys for the interface and
// the RIP the flags leave out.
func (f *localFlags) target(sys *arpguard.NetlinkSystem) (arpguard.Target, error) {
	t := arpguard.Target{Interface: *f.iface, Gateway: netip.Addr{}, Route: arpguard.RouteMode(*f.route)}
	var err error
	if t.Mode, err = arpguard.ParseMode(*f.mode); err != nil {
		return t, err
	}
	if t.VIPs, err = parseAddrs("vip", *f.vips); err != nil {
		return t, err
	}
	if *f.gateway != "" {
		if t.Gateway, err = netip.ParseAddr(*f.gateway); err != nil {
			return t, fmt.Errorf("gateway: %q is not an address", *f.gateway)
		}
	}
	for _, s := range splitList(*f.clients) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return t, fmt.Errorf("client-prefix: %q is not a prefix", s)
		}
		t.ClientPrefixes = append(t.ClientPrefixes, p)
	}
	if t.Interface == "" {
		if t.Interface, err = sys.DefaultRouteInterface(); err != nil {
			return t, fmt.Errorf("interface: %w; pass --interface", err)
		}
	}
	if *f.rip != "" {
		if t.RIP, err = netip.ParseAddr(*f.rip); err != nil {
			return t, fmt.Errorf("rip: %q is not an address", *f.rip)
		}
		return t, nil
	}
	v4 := len(t.VIPs) == 0 || t.VIPs[0].Is4()
	if t.Mode == arpguard.ModeNAT && t.Gateway.IsValid() {
		v4 = t.Gateway.Is4()
	}
	if t.RIP, err = sys.PrimaryAddress(t.Interface, v4); err != nil {
		return t, fmt.Errorf("rip: %w; pass --rip", err)
	}
	return t, nil
}

// checkLocal reports whether this machine is prepared as steps say,
// printing each drift, without changing anything.
func (e *cliEnv) checkLocal(ctx context.Context, name string, l *arpguard.Local, steps []arpguard.Step) int {
	drift, err := l.Check(ctx, steps)
	if err != nil {
		return e.fail(name, err, false)
	}
	if len(drift) == 0 {
		fmt.Fprintln(e.stdout, "prepared")
		return exitOK
	}
	for _, s := range drift {
		fmt.Fprintln(e.stdout, "drift:", s.Drift())
	}
	return exitFail
}
