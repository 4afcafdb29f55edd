package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

type serverFlags struct {
	name, address, forwarding  string
	health                     string
	port, weight, upper, lower int
}

func (f *serverFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.name, "name", "", "real server name")
	fs.StringVar(&f.address, "address", "", "real server IP address")
	fs.IntVar(&f.port, "port", 0, "real server port (default: the service's; only nat may differ)")
	fs.IntVar(&f.weight, "weight", 1, "configured weight 0..65535 (kept while the server is drained)")
	fs.StringVar(&f.forwarding, "forwarding", "", "dr, nat or tun (default: the service's)")
	fs.IntVar(&f.upper, "upper-threshold", 0, "connection limit (0 = none)")
	fs.IntVar(&f.lower, "lower-threshold", 0, "connections below which a server over its limit takes new ones again")
	fs.StringVar(&f.health, "health", "", "force the server up or down whatever its checks say, or auto to follow them")
}

// patch is the change the given flags make (all of them for add).
func (f *serverFlags) patch(fs *flag.FlagSet, all bool) server.ServerPatch {
	set := flagsGiven(fs)
	given := func(n string) bool { return all || set[n] }
	var p server.ServerPatch
	if given("name") {
		p.Name = &f.name
	}
	if given("address") {
		p.Address = &f.address
	}
	if given("port") {
		p.Port = &f.port
	}
	if given("weight") {
		p.Weight = &f.weight
	}
	if given("forwarding") {
		p.Forwarding = &f.forwarding
	}
	if given("upper-threshold") {
		p.UpperThreshold = &f.upper
	}
	if given("lower-threshold") {
		p.LowerThreshold = &f.lower
	}
	if set["health"] {
		p.Health = &f.health
	}
	return p
}

const rsUsage = "usage: ipvsctl rs add SERVICE --address IP [flags] | rs set|rm|drain|enable|disable SERVICE SERVER | rs list [SERVICE]\n" +
	"\nSERVICE is a service's name (or PROTO:ADDRESS:PORT, fwmark:N); SERVER a server's name, ADDRESS or ADDRESS:PORT.\n" +
	"Run 'ipvsctl rs VERB --help' for a verb's flags."

func runRS(env *cliEnv, args []string) int {
	verb, rest, code, ok := env.subVerb(rsUsage, args)
	if !ok {
		return code
	}
	switch verb {
	case "list":
		return rsList(env, rest)
	case "add", "set", "rm", "drain", "enable", "disable":
		return rsWrite(env, verb, rest)
	}
	return env.unknownSubVerb("rs", verb)
}

func rsWrite(env *cliEnv, verb string, args []string) int {
	synopsis, summary := "SERVICE SERVER [flags]", map[string]string{
		"set":     "Change the given attributes of a real server, then reconcile the kernel (in place).",
		"rm":      "Remove a real server; with active connections it is retired first (weight 0 until they end).",
		"drain":   "Drain a real server: weight 0 in the kernel (no new connections, established ones go on);\nits configured weight is kept, and rs enable gives it back.",
		"enable":  "Make a drained or disabled real server ready again: in the kernel at its configured weight.",
		"disable": "Keep a real server in the desired state but take it out of the kernel (retired first while it\nhas connections).",
	}[verb]
	if verb == "add" {
		synopsis, summary = "SERVICE --address IP [flags]", "Add a real server to a virtual service, then reconcile the kernel."
	}
	fs, g := env.newFlagSet("rs "+verb, synopsis, summary)
	var sf serverFlags
	if verb == "add" || verb == "set" {
		sf.register(fs)
	}
	var o writeOpts
	o.register(fs)
	o.registerDraft(fs)
	pos, st, ok := env.parseInterspersed(fs, args)
	if !ok {
		return st
	}
	want := 2
	if verb == "add" {
		want = 1
	}
	if len(pos) != want {
		fmt.Fprintf(env.stderr, "ipvsctl rs %s: want %s, got %d arguments\n", verb, synopsis, len(pos))
		return exitUsage
	}
	if verb == "add" && sf.address == "" {
		fmt.Fprintln(env.stderr, "ipvsctl rs add: --address is required")
		return exitUsage
	}
	return env.write("rs "+verb, g, o, func(ctx context.Context, b *backend) (*server.WriteResult, error) {
		opt := env.options(o)
		switch verb {
		case "add":
			var rs ipvsmgr.Server
			p := sf.patch(fs, true)
			p.ApplyTo(&rs)
			return b.AddServer(ctx, b.actor, pos[0], rs, opt)
		case "set":
			return b.PatchServer(ctx, b.actor, pos[0], pos[1], sf.patch(fs, false), opt)
		case "rm":
			return b.RemoveServer(ctx, b.actor, pos[0], pos[1], opt)
		case "drain":
			return b.DrainServer(ctx, b.actor, pos[0], pos[1], opt)
		}
		return b.SetServerEnabled(ctx, b.actor, pos[0], pos[1], verb == "enable", opt)
	})
}

func rsList(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("rs list", "[SERVICE] [--json]", "List the real servers of the desired state (of one service).")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, st, ok := env.parseInterspersed(fs, args)
	if !ok {
		return st
	}
	state, rev, code := env.loadState("rs list", g)
	if state == nil {
		return code
	}
	svcs := state.Services
	if len(pos) == 1 {
		i, err := server.FindService(state, pos[0])
		if err != nil {
			return env.fail("rs list", err, true)
		}
		svcs = svcs[i : i+1]
	}
	type row struct {
		Service string `json:"service"`
		ipvsmgr.Server
	}
	var rows []row
	for _, s := range svcs {
		for _, rs := range s.Servers {
			rows = append(rows, row{Service: orDefault(s.Name, s.Address), Server: rs})
		}
	}
	if *asJSON {
		if rows == nil {
			rows = []row{}
		}
		return env.printJSON("rs list", rows)
	}
	fmt.Fprintf(env.stdout, "# desired state, revision %d\n", rev)
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	// ADMIN is ready, drain (weight 0 in the kernel, WEIGHT kept) or maint (disabled).
	fmt.Fprintln(tw, "SERVICE\tNAME\tADDRESS\tPORT\tWEIGHT\tFORWARDING\tADMIN")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", r.Service, r.Name, r.Address, r.Port, r.EffectiveWeight(), orDefault(r.Forwarding, "-"), r.AdminState())
	}
	tw.Flush()
	return exitOK
}
