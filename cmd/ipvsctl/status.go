package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

func runStatus(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("status", "[--json]",
		"Show the kernel's IPVS table: every virtual service and real server with active and inactive\n"+
			"connections, counters and rates (like ipvsadm -Ln --stats --rate).")
	asJSON := fs.Bool("json", false, "print JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl status: takes no arguments")
		return exitUsage
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("status", err, false)
	}
	defer b.close()
	v, err := b.Status(ctx)
	if err != nil {
		return env.fail("status", err, false)
	}
	if *asJSON {
		return env.printJSON("status", v)
	}
	printStatus(env, v)
	return exitOK
}

func printStatus(env *cliEnv, v *server.StatusView) {
	if v.Redundancy != nil {
		fmt.Fprintf(env.stdout, "Redundancy: %s\n", redundancyLine(v.Redundancy))
		if v.Redundancy.Replication != nil {
			fmt.Fprintf(env.stdout, "Replication: %s\n", replicationLine(v.Redundancy.Replication))
		}
	}
	fmt.Fprintf(env.stdout, "IP Virtual Server table: %d services (timeouts tcp %ds, tcpfin %ds, udp %ds)\n",
		len(v.Services), v.Timeouts.TCP, v.Timeouts.TCPFin, v.Timeouts.UDP)
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Prot LocalAddress:Port Scheduler Flags\t\t\tActiveConn\tInActConn\tConns\tInPkts\tOutPkts\tInBytes\tOutBytes\tCPS\tInPPS\tOutPPS\tInBPS\tOutBPS\t")
	fmt.Fprintln(tw, "  -> RemoteAddress:Port\tForward\tWeight\t\t\t\t\t\t\t\t\t\t\t\t\t")
	for _, s := range v.Services {
		name := "FWM  " + strconv.FormatUint(uint64(s.FWMark), 10)
		if s.FWMark == 0 {
			name = fmt.Sprintf("%-4s %s", map[string]string{"tcp": "TCP", "udp": "UDP", "sctp": "SCTP"}[s.Protocol], hostPort(s.Address, s.Port))
		}
		if s.Family == "ipv6" && s.FWMark != 0 {
			name += " IPv6"
		}
		line := name + " " + s.Scheduler
		for _, f := range s.Flags {
			line += " " + f
		}
		var act, inact uint32
		for _, d := range s.Servers {
			act += d.ActiveConns
			inact += d.InactiveConns
		}
		fmt.Fprintf(tw, "%s\t\t\t%d\t%d\t%s\t\n", line, act, inact, statCols(s.Stats))
		for _, d := range s.Servers {
			fmt.Fprintf(tw, "  -> %s\t%s\t%d\t%d\t%d\t%s\t\n", hostPort(d.Address, d.Port), d.Forwarding, d.Weight, d.ActiveConns, d.InactiveConns, statCols(d.Stats))
		}
	}
	tw.Flush()
	if len(v.RealServers) > 0 {
		fmt.Fprintln(env.stdout, "\nReal-server preparation (last push, verify or undo):")
		tw = tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
		for _, r := range v.RealServers {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r.Target, r.Action, r.At.Local().Format(time.DateTime), r.Summary())
		}
		tw.Flush()
	}
}

func hostPort(addr string, port uint16) string {
	if len(addr) > 0 && addr[0] != '[' && containsColon(addr) {
		return "[" + addr + "]:" + strconv.Itoa(int(port))
	}
	return addr + ":" + strconv.Itoa(int(port))
}

func containsColon(s string) bool {
	for i := range len(s) {
		if s[i] == ':' {
			return true
		}
	}
	return false
}

func statCols(s ipvsmgr.Stats) string {
	return fmt.Sprintf("%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d", s.Conns, s.InPkts, s.OutPkts, s.InBytes, s.OutBytes, s.CPS, s.InPPS, s.OutPPS, s.InBPS, s.OutBPS)
}
