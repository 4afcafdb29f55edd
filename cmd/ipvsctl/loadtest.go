package main

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

const loadtestUsage = "usage: ipvsctl loadtest start --test NAME --phase default|tuned [--web-phase default|tuned] --service SERVICE [--tool TEXT]\n" +
	"       ipvsctl loadtest end ID --rps N [--p50 D] [--p99 D] [--cpu PCT] [--softirq PCT] [--entries N] [--buckets N] [--errors TEXT]\n" +
	"       ipvsctl loadtest list [--test NAME] [--json]\n" +
	"\nMark a load test's runs (scripts/loadtest.sh --lab does) so that the panel's Tuning page draws the\n" +
	"charts of each run's span beside its figures. Run 'ipvsctl loadtest VERB --help' for a verb's flags."

func runLoadtest(env *cliEnv, args []string) int {
	verb, rest, code, ok := env.subVerb(loadtestUsage, args)
	if !ok {
		return code
	}
	switch verb {
	case "start":
		return loadtestStart(env, rest)
	case "end":
		return loadtestEnd(env, rest)
	case "list":
		return loadtestList(env, rest)
	}
	return env.unknownSubVerb("loadtest", verb)
}

func loadtestStart(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("loadtest start", "--test NAME --phase default|tuned [--web-phase default|tuned] --service SERVICE [--tool TEXT]",
		"Mark the start of a load run through a virtual service, now; prints the run's number for loadtest end.")
	test := fs.String("test", "", "the load test this run belongs to (its runs are shown together)")
	phase := fs.String("phase", "", "default (the kernel's defaults) or tuned (after ipvsctl tune apply)")
	web := fs.String("web-phase", "", "the real servers' web servers: default (as shipped) or tuned (after realserver tune push --apply)")
	svc := fs.String("service", "", "the virtual service the load goes through (name, PROTO:ADDRESS:PORT or fwmark:N)")
	tool := fs.String("tool", "", "the load generator and its arguments, as shown with the run")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		return env.fail("loadtest start", fmt.Errorf("unexpected argument %q", fs.Arg(0)), true)
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("loadtest start", err, false)
	}
	defer b.close()
	run, err := b.StartLoadRun(ctx, b.actor, server.LoadRunStart{Test: *test, Phase: *phase, WebPhase: *web, Service: *svc, Tool: *tool})
	if err != nil {
		return env.fail("loadtest start", err, false)
	}
	fmt.Fprintln(env.stdout, run.ID)
	return exitOK
}

func loadtestEnd(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("loadtest end", "ID --rps N [--p50 D] [--p99 D] [--cpu PCT] [--softirq PCT] [--entries N] [--buckets N] [--errors TEXT]",
		"Mark the end of load run ID, now, with what the load generator measured.")
	rps := fs.Float64("rps", 0, "requests a second")
	p50 := fs.String("p50", "", "median latency, as wrk prints it (812.5us, 3.2ms, 1.05s)")
	p99 := fs.String("p99", "", "99th percentile latency, likewise")
	cpu := fs.Float64("cpu", 0, "the director's CPU busy share during the run, in percent")
	softirq := fs.Float64("softirq", 0, "its softirq share, in percent")
	entries := fs.Int("entries", 0, "the connection table's entries at the end")
	buckets := fs.Int("buckets", 0, "the connection table's buckets (2^conn_tab_bits)")
	requests := fs.Int64("requests", 0, "requests completed")
	errs := fs.String("errors", "", "the load generator's error counts, as it printed them")
	pos, st, ok := env.parseInterspersed(fs, args)
	if !ok {
		return st
	}
	if len(pos) != 1 {
		return env.fail("loadtest end", fmt.Errorf("want the run's number (loadtest start printed it), got %d arguments", len(pos)), true)
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id <= 0 {
		return env.fail("loadtest end", fmt.Errorf("ID: %q is not a load run's number", pos[0]), true)
	}
	res := server.LoadResult{RPS: *rps, CPU: *cpu / 100, Softirq: *softirq / 100, Entries: *entries, Buckets: *buckets, Requests: *requests, Errors: *errs}
	for _, d := range []struct {
		flag, v string
		to      *float64
	}{{"p50", *p50, &res.P50ms}, {"p99", *p99, &res.P99ms}} {
		if d.v == "" {
			continue
		}
		dur, err := time.ParseDuration(d.v)
		if err != nil {
			return env.fail("loadtest end", fmt.Errorf("--%s: %q is not a duration (812.5us, 3.2ms, 1.05s)", d.flag, d.v), true)
		}
		*d.to = float64(dur) / float64(time.Millisecond)
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("loadtest end", err, false)
	}
	defer b.close()
	if _, err := b.EndLoadRun(ctx, b.actor, id, res); err != nil {
		return env.fail("loadtest end", err, false)
	}
	return exitOK
}

func loadtestList(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("loadtest list", "[--test NAME] [--json]", "List a load test's runs (the latest test by default) with their figures.")
	test := fs.String("test", "", "the load test (default: the latest)")
	asJSON := fs.Bool("json", false, "print JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("loadtest list", err, false)
	}
	defer b.close()
	rs, err := b.LoadRuns(ctx, *test)
	if err != nil {
		return env.fail("loadtest list", err, false)
	}
	if *asJSON {
		return env.printJSON("loadtest list", rs)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tTEST\tPHASE\tWEB\tSERVICE\tSTARTED\tSECONDS\tREQ/S\tP50\tP99\tCPU\tSOFTIRQ\tENTRIES/BUCKETS")
	for _, r := range rs {
		secs, fig := "-", "-\t-\t-\t-\t-\t-"
		if r.EndedAt != nil {
			secs = strconv.FormatFloat(r.EndedAt.Sub(r.StartedAt).Seconds(), 'f', 0, 64)
		}
		if x := r.Result; x != nil {
			fig = fmt.Sprintf("%.0f\t%.1f ms\t%.1f ms\t%.0f%%\t%.0f%%\t%d / %d", x.RPS, x.P50ms, x.P99ms, 100*x.CPU, 100*x.Softirq, x.Entries, x.Buckets)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Test, r.Phase, cmp.Or(r.WebPhase, "-"), r.Service, r.StartedAt.Local().Format("2006-01-02 15:04:05"), secs, fig)
	}
	tw.Flush()
	if len(rs) == 0 {
		fmt.Fprintln(env.stdout, "no load test recorded")
	}
	return exitOK
}
