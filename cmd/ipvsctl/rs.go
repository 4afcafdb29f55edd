package main

import (
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// findServer returns the index of real server id (its name, ADDRESS or
// ADDRESS:PORT) in service s.
func findServer(s *ipvsmgr.Service, id string) (int, error) {
	for i := range s.Servers {
		rs := &s.Servers[i]
		if rs.Name == id || rs.Address == id || rs.Address+":"+strconv.Itoa(rs.Port) == id {
			return i, nil
		}
	}
	return -1, usageErrorf("virtual service %q has no real server %q", orDefault(s.Name, s.Address), id)
}

type serverFlags struct {
	name, address, forwarding  string
	port, weight, upper, lower int
}

func (f *serverFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.name, "name", "", "real server name")
	fs.StringVar(&f.address, "address", "", "real server IP address")
	fs.IntVar(&f.port, "port", 0, "real server port (default: the service's; only nat may differ)")
	fs.IntVar(&f.weight, "weight", 1, "weight 0..65535 (0 = drained)")
	fs.StringVar(&f.forwarding, "forwarding", "", "dr, nat or tun (default: the service's)")
	fs.IntVar(&f.upper, "upper-threshold", 0, "connection limit (0 = none)")
	fs.IntVar(&f.lower, "lower-threshold", 0, "connections below which a server over its limit takes new ones again")
}

func (f *serverFlags) applyTo(fs *flag.FlagSet, rs *ipvsmgr.Server, all bool) {
	set := flagsGiven(fs)
	given := func(n string) bool { return all || set[n] }
	if given("name") {
		rs.Name = f.name
	}
	if given("address") {
		rs.Address = f.address
	}
	if given("port") {
		rs.Port = f.port
	}
	if given("weight") {
		w := f.weight
		rs.Weight = &w
	}
	if given("forwarding") {
		rs.Forwarding = f.forwarding
	}
	if given("upper-threshold") {
		rs.UpperThreshold = f.upper
	}
	if given("lower-threshold") {
		rs.LowerThreshold = f.lower
	}
}

const rsUsage = "usage: ipvsctl rs add SERVICE --address IP [flags] | rs set|rm|drain|enable|disable SERVICE SERVER | rs list [SERVICE]\n" +
	"\nSERVICE is a service's name (or PROTO:ADDRESS:PORT, fwmark:N); SERVER a server's name, ADDRESS or ADDRESS:PORT.\n" +
	"Run 'ipvsctl rs VERB --help' for a verb's flags."

func runRS(env *cliEnv, args []string) int {
	args = moveGlobalFlags(args)
	if len(args) == 0 {
		fmt.Fprintln(env.stderr, rsUsage)
		return exitUsage
	}
	verb, rest := args[0], args[1:]
	switch verb {
	case "list":
		return rsList(env, rest)
	case "add", "set", "rm", "drain", "enable", "disable":
		return rsWrite(env, verb, rest)
	case "-h", "--help", "help":
		fmt.Fprintln(env.stdout, rsUsage)
		return exitOK
	}
	fmt.Fprintf(env.stderr, "ipvsctl rs: unknown verb %q (want add, set, rm, list, drain, enable or disable)\n", verb)
	return exitUsage
}

func rsWrite(env *cliEnv, verb string, args []string) int {
	synopsis, summary := "SERVICE SERVER [flags]", map[string]string{
		"set":     "Change the given attributes of a real server, then reconcile the kernel (in place).",
		"rm":      "Remove a real server; with active connections it drains at weight 0 first.",
		"drain":   "Set a real server's weight to 0: no new connections, established ones go on.",
		"enable":  "Put a disabled real server back into the kernel.",
		"disable": "Keep a real server in the desired state but take it out of the kernel (drained first).",
	}[verb]
	if verb == "add" {
		synopsis, summary = "SERVICE --address IP [flags]", "Add a real server to a virtual service, then reconcile the kernel."
	}
	fs, db := env.newFlagSet("rs "+verb, synopsis, summary)
	var sf serverFlags
	if verb == "add" || verb == "set" {
		sf.register(fs)
	}
	var o writeOpts
	o.register(fs)
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
	return env.commitAndReconcile("rs "+verb, *db, o, func(cur *ipvsmgr.State) (string, error) {
		si, err := findService(cur, pos[0])
		if err != nil {
			return "", err
		}
		svc := &cur.Services[si]
		if verb == "add" {
			if sf.address == "" {
				return "", usageErrorf("--address is required")
			}
			var rs ipvsmgr.Server
			sf.applyTo(fs, &rs, true)
			svc.Servers = append(svc.Servers, rs)
			return fmt.Sprintf("rs add %s %s", pos[0], orDefault(rs.Name, rs.Address)), nil
		}
		ri, err := findServer(svc, pos[1])
		if err != nil {
			return "", err
		}
		switch verb {
		case "set":
			sf.applyTo(fs, &svc.Servers[ri], false)
		case "rm":
			svc.Servers = append(svc.Servers[:ri], svc.Servers[ri+1:]...)
		case "drain":
			zero := 0
			svc.Servers[ri].Weight = &zero
		case "enable", "disable":
			on := verb == "enable"
			svc.Servers[ri].Enabled = &on
		}
		return fmt.Sprintf("rs %s %s %s", verb, pos[0], pos[1]), nil
	})
}

func rsList(env *cliEnv, args []string) int {
	fs, db := env.newFlagSet("rs list", "[SERVICE] [--json]", "List the real servers of the desired state (of one service).")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, st, ok := env.parseInterspersed(fs, args)
	if !ok {
		return st
	}
	state, rev, code := env.loadState("rs list", *db)
	if state == nil {
		return code
	}
	svcs := state.Services
	if len(pos) == 1 {
		i, err := findService(state, pos[0])
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
	fmt.Fprintln(tw, "SERVICE\tNAME\tADDRESS\tPORT\tWEIGHT\tFORWARDING\tENABLED")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%v\n", r.Service, r.Name, r.Address, r.Port, r.EffectiveWeight(), orDefault(r.Forwarding, "-"), r.IsEnabled())
	}
	tw.Flush()
	return exitOK
}
