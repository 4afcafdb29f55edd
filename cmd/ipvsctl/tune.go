package main

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
)

const tuneUsage = "usage: ipvsctl tune check [--json] [--conn-rate N] [--lifetime S]\n" +
	"       ipvsctl tune apply [--dry-run] [--conn-rate N] [--lifetime S]\n" +
	"       ipvsctl tune undo\n" +
	"\nThe director's kernel settings against what its desired state (forwarding methods, schedulers,\n" +
	"persistence) and its measured load call for: IPVS's connection table size, net.ipv4.vs.*, forwarding\n" +
	"and rp_filter for NAT, mh tables, RPS/RFS and interrupt spreading. Run on the director itself.\n" +
	"Run 'ipvsctl tune VERB --help' for a verb's flags."

func runTune(env *cliEnv, args []string) int {
	verb, rest, code, ok := env.subVerb(tuneUsage, args)
	if !ok {
		return code
	}
	switch verb {
	case "check":
		return tuneCheck(env, rest)
	case "apply":
		return tuneApply(env, rest)
	case "undo":
		return tuneUndo(env, rest)
	}
	return env.unknownSubVerb("tune", verb)
}

// tuneReport is `tune check --json`.
type tuneReport struct {
	Load     tune.Load      `json:"load"`
	Findings []tune.Finding `json:"findings"`
	Summary  string         `json:"summary"`
	FarOff   bool           `json:"far_off"`
	Reading  *tune.Reading  `json:"reading"`
}

// tuneInputs reads the host and the desired state and checks them; the
// load is the measured one unless --conn-rate/--lifetime plan for another.
func (e *cliEnv) tuneInputs(verb string, g *globalFlags, rate, lifetime float64) (*tuneReport, tune.Host, int) {
	if rate < 0 {
		fmt.Fprintf(e.stderr, "ipvsctl %s: --conn-rate %v: want 0 or more connections a second\n", verb, rate)
		return nil, nil, exitUsage
	}
	if lifetime < 0 {
		fmt.Fprintf(e.stderr, "ipvsctl %s: --lifetime %v: want 0 or more seconds\n", verb, lifetime)
		return nil, nil, exitUsage
	}
	ctx := context.Background()
	b, err := e.backend(ctx, g)
	if err != nil {
		return nil, nil, e.fail(verb, err, false)
	}
	defer b.close()
	st, _, err := b.State(ctx)
	if err != nil {
		return nil, nil, e.fail(verb, err, false)
	}
	h := tune.DirHost{Root: e.hostRoot}
	if h.Root == "" {
		h.Root = "/"
	}
	r, err := tune.Read(h)
	if err != nil {
		return nil, nil, e.fail(verb, err, false)
	}
	load := tune.MeasuredLoad(r)
	if rate > 0 || lifetime > 0 {
		if rate > 0 {
			load.ConnRate = rate
		}
		if lifetime > 0 {
			load.Lifetime = lifetime
		}
		load.From = "planned with --conn-rate/--lifetime"
	}
	fs := tune.Check(r, st, load)
	return &tuneReport{Load: load, Findings: fs, Summary: tune.Summary(fs), FarOff: tune.FarOff(fs), Reading: r}, h, exitOK
}

func tuneLoadFlags(fs interface {
	Float64(string, float64, string) *float64
}) (*float64, *float64) {
	return fs.Float64("conn-rate", 0, "plan for this many new connections a second instead of the measured rate"),
		fs.Float64("lifetime", 0, "seconds a connection stays in the table (default: measured, entries / rate)")
}

func tuneCheck(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("tune check", "[--json] [--conn-rate N] [--lifetime S]",
		"Print each setting with its value now, the recommended one for this director's forwarding methods\n"+
			"and load, why, and the source of the rule, then a summary line. Changes nothing.")
	asJSON := fs.Bool("json", false, "print JSON (the findings, the load and what was read)")
	rate, lifetime := tuneLoadFlags(fs)
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl tune check: takes no arguments")
		return exitUsage
	}
	rep, _, st := env.tuneInputs("tune check", g, *rate, *lifetime)
	if rep == nil {
		return st
	}
	if *asJSON {
		return env.printJSON("tune check", rep)
	}
	env.printTune(rep)
	return exitOK
}

func (e *cliEnv) printTune(rep *tuneReport) {
	l := rep.Load
	fmt.Fprintf(e.stdout, "load: %d connection entries, %.0f new a second, %.0f s in the table (%s)\n\n", l.Conns, l.ConnRate, l.Lifetime, l.From)
	e.printFindings(rep.Findings)
	fmt.Fprintln(e.stdout, rep.Summary)
}

// printFindings is the table, then why and the source of each one to change.
func (e *cliEnv) printFindings(fs []tune.Finding) {
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tSETTING\tCURRENT\tRECOMMENDED")
	for _, f := range fs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", statusWord(f.Status), f.Setting, f.Current, f.Recommended)
	}
	tw.Flush()
	fmt.Fprintln(e.stdout)
	for _, f := range fs {
		if f.Status == tune.OK || f.Status == tune.Info {
			continue
		}
		fmt.Fprintf(e.stdout, "%s: %s\n  source: %s\n", f.Setting, f.Why, f.Source)
		if f.Where != "" {
			fmt.Fprintf(e.stdout, "  at: %s\n", f.Where)
		}
	}
}

func statusWord(s tune.Status) string {
	switch s {
	case tune.Change:
		return "CHANGE"
	case tune.Far:
		return "FAR OFF"
	case tune.Info:
		return "-"
	}
	return "ok"
}

// tuneUndoPath is where apply keeps what it changed: beside the database.
func tuneUndoPath(db string) string { return filepath.Join(filepath.Dir(db), "tune-undo.json") }

func tuneApply(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("tune apply", "[--dry-run] [--conn-rate N] [--lifetime S]",
		"Print the changes first, then write the recommended sysctls to "+tune.SysctlFile+" and set them now,\n"+
			"and conn_tab_bits to "+tune.ModprobeFile+" (used when ip_vs is next loaded: the reload it needs\n"+
			"is printed). What was there before is saved beside the database for `ipvsctl tune undo`. RPS masks,\n"+
			"interrupt affinity and mh weights are left to the operator (tune check prints the commands).")
	dry := fs.Bool("dry-run", false, "print the changes and make none")
	rate, lifetime := tuneLoadFlags(fs)
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl tune apply: takes no arguments")
		return exitUsage
	}
	rep, h, st := env.tuneInputs("tune apply", g, *rate, *lifetime)
	if rep == nil {
		return st
	}
	p, err := tune.NewPlan(h, rep.Findings)
	if err != nil {
		return env.fail("tune apply", err, false)
	}
	if p.Empty() {
		fmt.Fprintln(env.stdout, "nothing to change: "+rep.Summary)
		return exitOK
	}
	fmt.Fprint(env.stdout, p.Diff())
	if *dry {
		return exitOK
	}
	undo := tuneUndoPath(g.db)
	if err := tune.Apply(h, p, undo, time.Now()); err != nil {
		return env.fail("tune apply", err, false)
	}
	fmt.Fprintf(env.stdout, "applied %d files and %d sysctls; `ipvsctl tune undo` restores them (saved in %s)\n", len(p.Files), len(p.Live), undo)
	return exitOK
}

func tuneUndo(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("tune undo", "",
		"Restore what `ipvsctl tune apply` changed: the files as they were before its first run (removed if\n"+
			"there were none) and each sysctl's earlier value.")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl tune undo: takes no arguments")
		return exitUsage
	}
	h := tune.DirHost{Root: env.hostRoot}
	if h.Root == "" {
		h.Root = "/"
	}
	p, err := tune.Undo(h, tuneUndoPath(g.db))
	if errors.Is(err, iofs.ErrNotExist) && p == nil {
		fmt.Fprintf(env.stderr, "ipvsctl tune undo: %v\n", err)
		return exitFail
	}
	if p != nil {
		fmt.Fprint(env.stdout, strings.ReplaceAll(p.Diff(), "(now)", "(restored)"))
	}
	if err != nil {
		return env.fail("tune undo", err, false)
	}
	fmt.Fprintln(env.stdout, "restored")
	return exitOK
}
