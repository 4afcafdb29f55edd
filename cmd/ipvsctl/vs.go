package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

// parseInterspersed parses flags that may come before or after the
// positional arguments, and returns the positionals.
func (e *cliEnv) parseInterspersed(fs *flag.FlagSet, args []string) ([]string, int, bool) {
	var pos []string
	for {
		if st, ok := e.parseFlags(fs, args); !ok {
			return nil, st, false
		}
		if fs.NArg() == 0 {
			return pos, exitOK, true
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// flagsGiven names the flags given on the command line.
func flagsGiven(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	return set
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// serviceFlags binds the flags that describe a virtual service.
type serviceFlags struct {
	protocol, address, iface, scheduler, flags, netmask, forwarding string
	port, persistence                                               int
	fwmark                                                          uint
	onePacket                                                       bool
}

func (f *serviceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.protocol, "protocol", "tcp", "tcp, udp or sctp")
	fs.StringVar(&f.address, "address", "", "virtual IP address")
	fs.IntVar(&f.port, "port", 0, "virtual port (not for a fwmark service)")
	fs.UintVar(&f.fwmark, "fwmark", 0, "firewall mark: the service is keyed by the mark")
	fs.StringVar(&f.iface, "interface", "", "interface the VIP is brought up on")
	fs.StringVar(&f.scheduler, "scheduler", "wlc", "rr wrr lc wlc lblc lblcr dh sh sed nq mh fo ovf twos")
	fs.StringVar(&f.flags, "scheduler-flags", "", "comma-separated: fallback, port (sh and mh)")
	fs.BoolVar(&f.onePacket, "one-packet", false, "one-packet scheduling (udp)")
	fs.IntVar(&f.persistence, "persistence", 0, "persistence timeout in seconds")
	fs.StringVar(&f.netmask, "persistence-netmask", "", "persistence granularity (255.255.255.0, or a prefix length for IPv6)")
	fs.StringVar(&f.forwarding, "forwarding", "", "dr, nat or tun (default: settings.network)")
}

// patch is the change the given flags make (all of them for add).
func (f *serviceFlags) patch(fs *flag.FlagSet, all bool) server.ServicePatch {
	set := flagsGiven(fs)
	given := func(n string) bool { return all || set[n] }
	var p server.ServicePatch
	if given("protocol") && (f.fwmark == 0 || set["protocol"]) {
		p.Protocol = &f.protocol
	}
	if given("address") {
		p.Address = &f.address
	}
	if given("port") {
		p.Port = &f.port
	}
	if given("fwmark") {
		m := uint32(f.fwmark)
		p.FWMark = &m
	}
	if given("interface") {
		p.Interface = &f.iface
	}
	if given("scheduler") {
		p.Scheduler = &f.scheduler
	}
	if given("scheduler-flags") {
		flags := splitList(f.flags)
		p.SchedulerFlags = &flags
	}
	if given("one-packet") {
		p.OnePacket = &f.onePacket
	}
	if given("persistence") {
		p.Persistence = &f.persistence
	}
	if given("persistence-netmask") {
		p.PersistenceNetmask = &f.netmask
	}
	if given("forwarding") {
		p.Forwarding = &f.forwarding
	}
	return p
}

const vsUsage = "usage: ipvsctl vs add|set|rm|list|enable|disable [NAME] [flags]\n\nRun 'ipvsctl vs VERB --help' for a verb's flags."

func runVS(env *cliEnv, args []string) int {
	verb, rest, code, ok := env.subVerb(vsUsage, args)
	if !ok {
		return code
	}
	switch verb {
	case "list":
		return vsList(env, rest)
	case "add", "set":
		return vsAddSet(env, verb, rest)
	case "rm", "enable", "disable":
		return vsSimple(env, verb, rest)
	}
	return env.unknownSubVerb("vs", verb)
}

func vsAddSet(env *cliEnv, verb string, args []string) int {
	summary := map[string]string{
		"add": "Add a virtual service named NAME to the desired state, then reconcile the kernel.",
		"set": "Change the given attributes of virtual service NAME, then reconcile the kernel.",
	}[verb]
	fs, g := env.newFlagSet("vs "+verb, "NAME [flags]", summary)
	var sf serviceFlags
	sf.register(fs)
	var o writeOpts
	o.register(fs)
	o.registerDraft(fs)
	pos, st, ok := env.parseInterspersed(fs, args)
	if !ok {
		return st
	}
	if len(pos) != 1 {
		fmt.Fprintf(env.stderr, "ipvsctl vs %s: want exactly one service NAME, got %d arguments\n", verb, len(pos))
		return exitUsage
	}
	name := pos[0]
	return env.write("vs "+verb, g, o, func(ctx context.Context, b *backend) (*server.WriteResult, error) {
		if verb == "add" {
			svc := ipvsmgr.Service{Name: name}
			p := sf.patch(fs, true)
			p.ApplyTo(&svc)
			return b.AddService(ctx, b.actor, svc, env.options(o))
		}
		return b.PatchService(ctx, b.actor, name, sf.patch(fs, false), env.options(o))
	})
}

func vsSimple(env *cliEnv, verb string, args []string) int {
	fs, g := env.newFlagSet("vs "+verb, "NAME", map[string]string{
		"rm":      "Remove virtual service NAME (and its real servers), then reconcile the kernel.",
		"enable":  "Put virtual service NAME back into the kernel.",
		"disable": "Keep virtual service NAME in the desired state but take it out of the kernel.",
	}[verb])
	var o writeOpts
	o.register(fs)
	o.registerDraft(fs)
	pos, st, ok := env.parseInterspersed(fs, args)
	if !ok {
		return st
	}
	if len(pos) != 1 {
		fmt.Fprintf(env.stderr, "ipvsctl vs %s: want exactly one service NAME, got %d arguments\n", verb, len(pos))
		return exitUsage
	}
	return env.write("vs "+verb, g, o, func(ctx context.Context, b *backend) (*server.WriteResult, error) {
		if verb == "rm" {
			return b.RemoveService(ctx, b.actor, pos[0], env.options(o))
		}
		return b.SetServiceEnabled(ctx, b.actor, pos[0], verb == "enable", env.options(o))
	})
}

func vsList(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("vs list", "[--json]", "List the virtual services of the desired state.")
	asJSON := fs.Bool("json", false, "print JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	state, rev, code := env.loadState("vs list", g)
	if state == nil {
		return code
	}
	if *asJSON {
		return env.printJSON("vs list", state.Services)
	}
	fmt.Fprintf(env.stdout, "# desired state, revision %d\n", rev)
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSERVICE\tSCHEDULER\tFORWARDING\tSERVERS\tENABLED")
	for _, s := range state.Services {
		key := fmt.Sprintf("%s %s:%d", orDefault(s.Protocol, "tcp"), s.Address, s.Port)
		if s.FWMark != 0 {
			key = fmt.Sprintf("fwmark %d %s", s.FWMark, s.Address)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%v\n", s.Name, key, orDefault(s.Scheduler, "wlc"),
			orDefault(s.Forwarding, orDefault(state.Settings.Network, "dr")), len(s.Servers), s.IsEnabled())
	}
	tw.Flush()
	return exitOK
}

// loadState reads the stored desired state; on failure it returns nil and the
// exit status.
func (env *cliEnv) loadState(verb string, g *globalFlags) (*ipvsmgr.State, int64, int) {
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return nil, 0, env.fail(verb, err, false)
	}
	defer b.close()
	state, rev, err := b.State(ctx)
	if err != nil {
		return nil, 0, env.fail(verb, err, false)
	}
	return state, rev, exitOK
}

func (env *cliEnv) printJSON(verb string, v any) int {
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return env.fail(verb, err, false)
	}
	return exitOK
}
