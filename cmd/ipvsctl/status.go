package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/health"
	"github.com/ipvsctl/ipvsctl/server"
)

func runStatus(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("status", "[--states] [--json]",
		"Show the kernel's IPVS table: every virtual service and real server with active and inactive\n"+
			"connections, counters and rates (like ipvsadm -Ln --stats --rate). --states shows instead each\n"+
			"service of the desired state and its real servers in the panel's words (up, degraded, all down,\n"+
			"down, disabled, unknown; a real server's up, down, draining, drained, full, ...) with why.\n"+
			"Through a daemon it also shows the pair, BGP, the followers and, per alert destination of\n"+
			"settings.alerts (the mail relay, each webhook), how its deliveries fare: last sent, last\n"+
			"failure and why, queued, sent, failed, dropped.\n"+
			"With a daemon and checks, a Checks line says whether the director is ready (every check has run once\n"+
			"since the start: GET /readyz), which rounds are late and how late the runs start against their schedule\n"+
			"(median and p99), and each checked server when it was last checked.")
	asJSON := fs.Bool("json", false, "print JSON")
	states := fs.Bool("states", false, "the desired state's services and real servers in the panel's words, with why")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl status: takes no arguments")
		return exitUsage
	}
	ctx := context.Background()
	b, err := env.readBackend(ctx, g)
	if err != nil {
		return env.fail("status", err, false)
	}
	defer b.close()
	v, err := b.Status(ctx)
	if err != nil {
		return env.fail("status", err, false)
	}
	switch {
	case *asJSON && *states:
		return env.printJSON("status", v.States)
	case *asJSON:
		return env.printJSON("status", v)
	case *states:
		printStates(env, v.States)
	default:
		printStatus(env, v)
	}
	return exitOK
}

// printStates prints each service and its real servers in the words the
// panel's tiles show, with why.
func printStates(env *cliEnv, states []server.ServiceState) {
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tADDRESS\tSTATE\tADMIN\tHEALTH\tWHY")
	for _, s := range states {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t-\t%s\n", s.ID, s.Service, s.State, map[bool]string{true: "enabled", false: "disabled"}[s.Enabled], orDash(s.Reason))
		for _, r := range s.Servers {
			fmt.Fprintf(tw, "  -> %s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Address, r.State, r.Admin, r.Health, orDash(r.Reason))
		}
	}
	tw.Flush()
}

func printStatus(env *cliEnv, v *server.StatusView) {
	if v.Redundancy != nil {
		fmt.Fprintf(env.stdout, "Redundancy: %s\n", redundancyLine(v.Redundancy))
		if v.Redundancy.Replication != nil {
			fmt.Fprintf(env.stdout, "Replication: %s\n", replicationLine(v.Redundancy.Replication))
		}
	}
	if v.BGP != nil {
		fmt.Fprintf(env.stdout, "BGP: %s\n", bgpLine(v.BGP))
	}
	if v.Checker != nil && v.Checker.Checks > 0 { // a director without checks is ready at its first reconcile: /readyz, --json
		fmt.Fprintf(env.stdout, "Checks: %s\n", checkerLine(v.Checker))
	}
	for _, f := range v.Followers {
		label := "Follower"
		if f.Refused {
			label = "Refused director"
		}
		fmt.Fprintf(env.stdout, "%s: %s\n", label, followerLine(f))
	}
	printAlertDeliveries(env, v.Alerts)
	fmt.Fprintf(env.stdout, "IP Virtual Server table: %d services (timeouts tcp %ds, tcpfin %ds, udp %ds)\n",
		len(v.Services), v.Timeouts.TCP, v.Timeouts.TCPFin, v.Timeouts.UDP)
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	// The health column only when some server has a check or a forced health.
	withHealth, hcol, hhead := false, "", ""
	for _, s := range v.Services {
		for _, d := range s.Servers {
			withHealth = withHealth || d.Health != nil
		}
	}
	if withHealth {
		hcol, hhead = "\t", "Health\t"
	}
	now := time.Now()
	fmt.Fprintln(tw, "Prot LocalAddress:Port Scheduler Flags\t\t\tActiveConn\tInActConn\tConns\tInPkts\tOutPkts\tInBytes\tOutBytes\tCPS\tInPPS\tOutPPS\tInBPS\tOutBPS\t"+hcol)
	fmt.Fprintln(tw, "  -> RemoteAddress:Port\tForward\tWeight\t\t\t\t\t\t\t\t\t\t\t\t\t"+hhead)
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
		fmt.Fprintf(tw, "%s\t\t\t%d\t%d\t%s\t%s\n", line, act, inact, statCols(s.Stats), hcol)
		for _, d := range s.Servers {
			weight, h := strconv.FormatUint(uint64(d.Weight), 10), ""
			if d.Health != nil {
				h = healthText(d.Health, now) + "\t"
				if !d.Health.InKernel {
					weight = "-"
				}
			} else if withHealth {
				h = "unchecked\t"
			}
			fmt.Fprintf(tw, "  -> %s\t%s\t%s\t%d\t%d\t%s\t%s\n", hostPort(d.Address, d.Port), orDefault(d.Forwarding, "-"), weight, d.ActiveConns, d.InactiveConns, statCols(d.Stats), h)
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

// healthText is a server's health in one cell: its phase and for how long,
// the last result, and its weight when the checks change it.
func healthText(h *server.HealthStatus, now time.Time) string {
	s := h.Phase
	if h.Since != nil {
		s += " " + since(now.Sub(*h.Since))
	}
	detail := h.LastResult
	if detail == "" {
		detail = h.Reason
	}
	if h.Fault != "" {
		detail = "checker fault: " + h.Fault
	}
	if detail != "" {
		s += ": " + detail
	}
	if h.Flapping {
		s += ", flapping"
	}
	if h.LastCheckAge != nil {
		s += ", checked " + since(secondsDuration(*h.LastCheckAge)) + " ago"
	}
	if h.Late > 0 {
		s += ", late by " + since(secondsDuration(h.Late))
	}
	if h.EffectiveWeight != h.ConfiguredWeight && h.Phase != "sorry server" {
		s += fmt.Sprintf(", weight %d of %d", h.EffectiveWeight, h.ConfiguredWeight)
	}
	if !h.InKernel {
		s += ", not in the kernel"
	}
	return s
}

// checkerLine is the checker's own health in a line: ready or what it
// waits for, and its late rounds.
func checkerLine(c *server.CheckerStatus) string {
	s := "ready"
	if !c.Ready {
		s = "not ready, waiting for " + c.Waiting
	}
	s += fmt.Sprintf(" (%d checks, %d distinct", c.Checks, c.Distinct)
	if c.Checks > 0 && c.OldestRunAge > 0 {
		s += ", oldest result " + since(secondsDuration(c.OldestRunAge)) + " ago"
	}
	s += ")"
	if c.Late > 0 {
		s += fmt.Sprintf("; %d late, the worst (%s) by %s", c.Late, c.WorstTarget, since(secondsDuration(c.WorstLate)))
	}
	if c.LateRounds > 0 {
		s += fmt.Sprintf("; %d rounds late since the start", c.LateRounds)
	}
	switch d := c.StartDelay; {
	case d.Count == 0:
	case d.P99 <= health.DelayBounds[0]:
		s += "; runs start on time (99% within 1ms)"
	default:
		s += fmt.Sprintf("; runs start %s late at the median, %s at p99", delay(d.P50), delay(d.P99))
	}
	return s
}

// delay is a short lateness for a person: 0s, 3ms, 1.2s.
func delay(s float64) string {
	return secondsDuration(s).Round(time.Millisecond).String()
}

func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// since is a duration rounded for a person: 42s, 5m12s, 3h4m, 2d5h.
func since(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
	days := int(d / (24 * time.Hour))
	return fmt.Sprintf("%dd%dh", days, int((d-time.Duration(days)*24*time.Hour)/time.Hour))
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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printAlertDeliveries prints a line per alert destination: how its
// alerts fare.
func printAlertDeliveries(env *cliEnv, ds []server.AlertDelivery) {
	for _, d := range ds {
		fmt.Fprintf(env.stdout, "Alerts: %s\n", alertDeliveryLine(d))
	}
}

func alertDeliveryLine(d server.AlertDelivery) string {
	s := fmt.Sprintf("%s %s: %d sent, %d failed, %d dropped, %d queued", d.Kind, d.Destination, d.Sent, d.Failed, d.Dropped, d.Queued)
	if d.LastOK != nil {
		s += ", last sent " + d.LastOK.Local().Format(time.DateTime)
	}
	if d.LastErrorAt != nil {
		s += ", last failed " + d.LastErrorAt.Local().Format(time.DateTime) + ": " + d.LastError
	}
	if d.Failing() {
		s += " (failing)"
	}
	return s
}
