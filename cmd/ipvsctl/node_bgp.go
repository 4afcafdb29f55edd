package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
	"github.com/ipvsctl/ipvsctl/server"
)

func nodeDrain(env *cliEnv, verb string, args []string) int {
	help := "Take this director out of the BGP group without dropping traffic: by default its routes stay\n" +
		"announced with its AS prepended (settings.bgp.drain.prepend times), so that the routers prefer the\n" +
		"other directors; with settings.bgp.drain.mode withdraw they are withdrawn. Its established flows\n" +
		"reach the others too, and mh with sloppy_tcp keeps them going. Then it waits until no new\n" +
		"connection has reached this director's VIPs for settings.bgp.drain.quiet seconds (at most\n" +
		"settings.bgp.drain.timeout), showing its progress, and reports drained (exit 0) or timed out (exit 1)."
	usage := "[--no-wait] [--wait-max D]"
	if verb == "undrain" {
		help, usage = "Announce this director's VIPs again, with the plain AS path, after a drain.", ""
	}
	fs, g := env.newFlagSet("node "+verb, usage, help)
	noWait, waitMax := new(bool), new(time.Duration)
	if verb == "drain" {
		noWait = fs.Bool("no-wait", false, "return once the drain is recorded; node show follows it")
		waitMax = fs.Duration("wait-max", 0, "stop waiting after this long (0: settings.bgp.drain.timeout and a little)")
	}
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "ipvsctl node %s: takes no arguments\n", verb)
		return exitUsage
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("node "+verb, err, false)
	}
	defer b.close()
	drained := verb == "drain"
	v, err := b.SetNode(ctx, b.actor, server.NodePatch{Drained: &drained})
	if err != nil {
		return env.fail("node "+verb, err, false)
	}
	if !drained || *noWait {
		printNode(env.stdout, v)
		return exitOK
	}
	if v.BGP == nil {
		printNode(env.stdout, v)
		fmt.Fprintln(env.stdout, "no BGP speaker runs here: the drain is recorded, and the daemon follows it when it runs with settings.bgp")
		return exitOK
	}
	return waitDrained(ctx, env, b, *waitMax)
}

// waitDrained follows a drain through node show until it is drained or
// timed out, printing each change of its progress.
func waitDrained(ctx context.Context, env *cliEnv, b *backend, waitMax time.Duration) int {
	var last string
	start := time.Now()
	for {
		v, err := b.NodeSettings(ctx)
		if err != nil {
			return env.fail("node drain", err, false)
		}
		var d *bgp.DrainStatus
		if v.BGP != nil {
			d = v.BGP.Drain
		}
		if d != nil {
			if waitMax == 0 {
				waitMax = time.Duration(d.Timeout*float64(time.Second)) + 10*time.Second
			}
			if line := drainLine(d); line != last {
				fmt.Fprintf(env.stdout, "%5.1fs %s\n", time.Since(start).Seconds(), line)
				last = line
			}
			switch d.Phase {
			case bgp.DrainDrained:
				return exitOK
			case bgp.DrainTimedOut:
				return exitFail
			}
		}
		if waitMax > 0 && time.Since(start) > waitMax {
			fmt.Fprintf(env.stderr, "ipvsctl node drain: still not drained after %s (node show follows it)\n", waitMax.Round(time.Second))
			return exitFail
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// drainLine is a drain's progress in one line.
func drainLine(d *bgp.DrainStatus) string {
	how := "routes withdrawn"
	if d.Mode == "prepend" {
		how = fmt.Sprintf("AS prepended %d times", d.Prepend)
	}
	return fmt.Sprintf("%s (%s): %s", d.Phase, how, d.Why)
}

// printNodeBGP prints the BGP part of node show, when there is one.
func printNodeBGP(w io.Writer, v *server.NodeView) {
	if v.RouterID == "" && v.BGPSource == "" && !v.Drained && v.BGP == nil {
		return
	}
	fmt.Fprintf(w, "router-id:   %s\n", orDefault(v.RouterID, "from the addresses"))
	fmt.Fprintf(w, "bgp-source:  %s\n", orDefault(v.BGPSource, "the kernel's choice"))
	fmt.Fprintf(w, "drained:     %t\n", v.Drained)
	b := v.BGP
	if b == nil {
		fmt.Fprintln(w, "bgp:         not running (no daemon, or no settings.bgp)")
		return
	}
	fmt.Fprintf(w, "bgp:         router ID %s, %d prefixes announced", b.RouterID, b.Announced)
	if b.Error != "" {
		fmt.Fprintf(w, ", error: %s", b.Error)
	}
	fmt.Fprintln(w)
	if b.Drain != nil {
		fmt.Fprintf(w, "drain:       %s\n", drainLine(b.Drain))
	}
	for _, p := range b.Peers {
		bfd := ""
		if p.BFD != "" {
			bfd = ", BFD " + p.BFD
		}
		fmt.Fprintf(w, "  peer %s AS %d: %s%s, %d advertised, %d received\n", p.Address, p.ASN, p.State, bfd, p.Advertised, p.Received)
	}
	for _, d := range b.VIPs {
		switch {
		case d.Announce && d.Prepend > 0:
			fmt.Fprintf(w, "  %s announced, AS prepended %d times: %s\n", d.Prefix, d.Prepend, d.Reason)
		case d.Announce:
			fmt.Fprintf(w, "  %s announced\n", d.Prefix)
		default:
			fmt.Fprintf(w, "  %s withdrawn: %s\n", d.Prefix, d.Reason)
		}
	}
	printFingerprints(w, b)
}

// printFingerprints prints each BGP-mode service's Maglev-input
// fingerprint, what every other director said (and how long ago), and
// where they differ.
func printFingerprints(w io.Writer, b *server.BGPStatus) {
	for _, f := range b.Fingerprints {
		fmt.Fprintf(w, "  maglev %s (%s): %s  %s\n", f.Service, f.Key, f.Fingerprint, f.Inputs)
	}
	for _, d := range b.Directors {
		fmt.Fprintf(w, "  director %s%s: %s\n", d.Director, directorWhere(d), directorState(d))
	}
	for _, m := range b.Mismatches {
		fmt.Fprintf(w, "  MISMATCH %s with %s: %s\n", m.Service, m.Director, m.Why)
	}
}

// directorWhere says where another director was heard, beside its name.
func directorWhere(d bgp.DirectorFingerprints) string {
	var parts []string
	if d.Name != "" && d.Name != d.Director {
		parts = append(parts, "router ID "+d.Name)
	}
	if d.Address != "" && d.Address != d.Director {
		parts = append(parts, "at "+d.Address)
	}
	if d.Via != "" {
		parts = append(parts, "via "+d.Via)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// directorState says whether another director was compared, and why not.
func directorState(d bgp.DirectorFingerprints) string {
	heard := "never heard"
	if !d.ReportedAt.IsZero() {
		heard = fmt.Sprintf("last heard %.0fs ago", d.AgeSeconds)
	}
	switch {
	case d.Error != "":
		return "not compared: " + d.Error + " (" + heard + ")"
	case d.Stale:
		return "STALE, not compared: " + heard
	}
	return fmt.Sprintf("%d services compared, %s", len(d.Services), heard)
}

// bgpLine is the BGP summary of status.
func bgpLine(b *server.BGPStatus) string {
	up := 0
	for _, p := range b.Peers {
		if p.Up {
			up++
		}
	}
	s := fmt.Sprintf("%d of %d sessions up, %d of %d VIPs announced", up, len(b.Peers), b.Announced, len(b.VIPs))
	if b.Drain != nil {
		s += ", " + b.Drain.Phase
	}
	compared := 0
	var stale, unheard []string
	for _, d := range b.Directors {
		switch {
		case d.Error != "":
			unheard = append(unheard, d.Director)
		case d.Stale:
			stale = append(stale, fmt.Sprintf("%s %.0fs", d.Director, d.AgeSeconds))
		default:
			compared++
		}
	}
	if b.Mismatch {
		var which []string
		for _, m := range b.Mismatches {
			which = append(which, m.Service+" on "+m.Director)
		}
		s += fmt.Sprintf(", MAGLEV MISMATCH: %s (node show says why)", strings.Join(which, ", "))
		if n := compared - countDirectors(b.Mismatches); n > 0 {
			s += fmt.Sprintf("; match %d other directors", n)
		}
	} else if compared > 0 {
		s += fmt.Sprintf(", Maglev inputs match %d other directors", compared)
	}
	if len(stale) > 0 {
		s += ", STALE (not compared): " + strings.Join(stale, ", ")
	}
	if len(unheard) > 0 {
		s += ", not compared: " + strings.Join(unheard, ", ")
	}
	if b.Error != "" {
		s += ", error: " + b.Error
	}
	return s
}

// countDirectors counts the directors named in ms.
func countDirectors(ms []bgp.Mismatch) int {
	seen := map[string]bool{}
	for _, m := range ms {
		seen[m.Director] = true
	}
	return len(seen)
}
