package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/ipvsctl/ipvsctl/server"
)

const settingsUsage = "usage: ipvsctl settings show [--json] | settings set [--network dr|nat|tun] [--tcp-timeout S] [--tcpfin-timeout S]\n" +
	"       [--udp-timeout S] [--keep-foreign-services=BOOL] [--retire-timeout S] [--maintenance-dir DIR]\n" +
	"\nThe desired state's global settings (settings.redundancy is edited with apply or the panel).\n" +
	"Run 'ipvsctl settings VERB --help' for a verb's flags."

func runSettings(env *cliEnv, args []string) int {
	verb, rest, code, ok := env.subVerb(settingsUsage, args)
	if !ok {
		return code
	}
	switch verb {
	case "show":
		return settingsShow(env, rest)
	case "set":
		return settingsSet(env, rest)
	}
	return env.unknownSubVerb("settings", verb)
}

func settingsShow(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("settings show", "[--json]", "Show the desired state's global settings.")
	asJSON := fs.Bool("json", false, "print JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	state, rev, code := env.loadState("settings show", g)
	if state == nil {
		return code
	}
	if *asJSON {
		return env.printJSON("settings show", state.Settings)
	}
	s := state.Settings
	fmt.Fprintf(env.stdout, "# desired state, revision %d\n", rev)
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "network\t%s\n", orDefault(s.Network, "dr (default)"))
	fmt.Fprintf(tw, "tcp_timeout\t%d\n", s.TCPTimeout)
	fmt.Fprintf(tw, "tcpfin_timeout\t%d\n", s.TCPFinTimeout)
	fmt.Fprintf(tw, "udp_timeout\t%d\n", s.UDPTimeout)
	fmt.Fprintf(tw, "keep_foreign_services\t%v\n", s.KeepForeignServices)
	fmt.Fprintf(tw, "retire_timeout\t%d\n", s.RetireTimeout)
	fmt.Fprintf(tw, "maintenance_dir\t%s\n", orDefault(s.MaintenanceDir, "-"))
	fmt.Fprintf(tw, "redundancy\t%v\n", s.Redundancy != nil)
	tw.Flush()
	return exitOK
}

func settingsSet(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("settings set", "[flags]",
		"Change the given global settings (only the flags given), then reconcile the kernel.")
	network := fs.String("network", "", "default forwarding method: dr, nat or tun")
	tcp := fs.Int("tcp-timeout", 0, "IPVS TCP timeout in seconds (0 leaves the kernel's)")
	fin := fs.Int("tcpfin-timeout", 0, "IPVS TCP FIN timeout in seconds (0 leaves the kernel's)")
	udp := fs.Int("udp-timeout", 0, "IPVS UDP timeout in seconds (0 leaves the kernel's)")
	keep := fs.Bool("keep-foreign-services", false, "leave kernel services ipvsctl did not make alone")
	retire := fs.Int("retire-timeout", 0, "seconds a removed real server keeps its connections at weight 0 (0: the default)")
	fs.IntVar(retire, "drain-timeout", 0, "the old name of --retire-timeout")
	maintenance := fs.String("maintenance-dir", "", "directory whose files (named ADDRESS, ADDRESS:PORT, HOST or HOST:PORT) take\n"+
		"those real servers out of every service (ldirectord's maintenancedir); an absolute path, '' for none")
	var o writeOpts
	o.register(fs)
	o.registerDraft(fs)
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl settings set: takes no arguments")
		return exitUsage
	}
	var p server.SettingsPatch
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "network":
			p.Network = network
		case "tcp-timeout":
			p.TCPTimeout = tcp
		case "tcpfin-timeout":
			p.TCPFinTimeout = fin
		case "udp-timeout":
			p.UDPTimeout = udp
		case "keep-foreign-services":
			p.KeepForeignServices = keep
		case "retire-timeout", "drain-timeout":
			p.RetireTimeout = retire
		case "maintenance-dir":
			p.MaintenanceDir = maintenance
		}
	})
	if p == (server.SettingsPatch{}) {
		fmt.Fprintln(env.stderr, "ipvsctl settings set: give at least one setting")
		return exitUsage
	}
	return env.write("settings set", g, o, func(ctx context.Context, b *backend) (*server.WriteResult, error) {
		return b.SetSettings(ctx, b.actor, p, env.options(o))
	})
}
