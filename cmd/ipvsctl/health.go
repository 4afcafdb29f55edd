package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

func runHealth(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("health", "[SERVICE [SERVER]] [--json] [--limit N] [--check]",
		"Show what the health checks say of each checked real server: up, down, going up 1/2, going down 2/3,\n"+
			"unchecked, forced up or down; since when, the last result, the configured and effective weight, and\n"+
			"(with SERVICE) each server's recent transitions with their reasons. --check runs SERVER's check\n"+
			"once now and prints what it found (it counts toward neither rise nor fall).")
	asJSON := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", 20, "recent transitions per server (with SERVICE)")
	checkNow := fs.Bool("check", false, "run SERVER's check once now")
	pos, st, ok := env.parseInterspersed(fs, args)
	if !ok {
		return st
	}
	if len(pos) > 2 || *checkNow && len(pos) != 2 || *limit < 1 {
		fmt.Fprintln(env.stderr, "ipvsctl health: want [SERVICE [SERVER]] (--check needs both), --limit at least 1")
		return exitUsage
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("health", err, false)
	}
	defer b.close()
	if *checkNow {
		res, err := b.CheckServer(ctx, b.actor, pos[0], pos[1])
		if err != nil {
			return env.fail("health", err, false)
		}
		if *asJSON {
			if code := env.printJSON("health", res); code != exitOK || res.Outcome == "pass" {
				return code
			}
			return exitFail
		}
		fmt.Fprintf(env.stdout, "%s %s: %s check of %s: %s: %s (%s)\n", res.Service, res.Server, res.Check, res.Target,
			res.Outcome, res.Reason, time.Duration(res.Duration*float64(time.Second)).Round(time.Millisecond))
		if res.Outcome != "pass" {
			return exitFail
		}
		return exitOK
	}
	q := server.HealthQuery{Limit: *limit}
	if len(pos) > 0 {
		q.Service = pos[0]
	}
	if len(pos) > 1 {
		q.Server = pos[1]
	}
	reports, err := b.Health(ctx, q)
	if err != nil {
		return env.fail("health", err, false)
	}
	if *asJSON {
		return env.printJSON("health", reports)
	}
	printHealth(env, reports, time.Now())
	return exitOK
}

func printHealth(env *cliEnv, reports []server.HealthReport, now time.Time) {
	if len(reports) == 0 {
		fmt.Fprintln(env.stdout, "no real server has a check or a forced health")
		return
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tSERVER\tADDRESS\tCHECK\tHEALTH\tSINCE\tWEIGHT\tKERNEL\tLAST RESULT")
	for _, r := range reports {
		sinceCol := "-"
		if r.Since != nil {
			sinceCol = r.Since.Local().Format(time.DateTime) + " (" + since(now.Sub(*r.Since)) + ")"
		}
		last := r.LastResult
		if r.Fault != "" {
			last = "checker fault: " + r.Fault
		} else if last == "" {
			last = r.Reason
		}
		if r.Flapping {
			last += " (flapping)"
		}
		kernel := "out"
		if r.InKernel {
			kernel = "in"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", r.Service, r.Name, r.Address, orDefault(r.Check, "-"),
			r.Phase, sinceCol, r.EffectiveWeight, r.ConfiguredWeight, kernel, orDefault(last, "-"))
	}
	tw.Flush()
	for _, r := range reports {
		if len(r.Transitions) == 0 {
			continue
		}
		fmt.Fprintf(env.stdout, "\n%s %s (%s), newest first:\n", r.Service, r.Name, r.Address)
		tw = tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
		for _, t := range r.Transitions {
			what := t.From + " -> " + t.To
			if t.From == t.To {
				what = t.To
			}
			detail := t.Reason
			if t.Fault != "" {
				detail = "checker fault: " + t.Fault
			}
			if t.Weight != nil {
				detail += fmt.Sprintf(" (weight %d)", *t.Weight)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.At.Local().Format(time.DateTime), what, detail)
		}
		tw.Flush()
	}
}
