package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

func runCharts(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("charts", "SERVICE [SERVER] [--range hour|day] [--json]",
		"Print the series the panel charts on a virtual service's (or a real server's) page: active\n"+
			"connections, new connections/s, packets/s and bytes/s, every 10 s over the last hour or every\n"+
			"minute over the last day, oldest first. The daemon samples them; none are kept without it.")
	rng := fs.String("range", "hour", "hour (10 s points) or day (1 min points)")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, st, ok := env.parseInterspersed(fs, args)
	if !ok {
		return st
	}
	if len(pos) < 1 || len(pos) > 2 {
		fmt.Fprintf(env.stderr, "ipvsctl charts: want SERVICE [SERVER], got %d arguments\n", len(pos))
		return exitUsage
	}
	q := server.ChartQuery{Service: pos[0], Range: *rng}
	if len(pos) == 2 {
		q.Server = pos[1]
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("charts", err, false)
	}
	defer b.close()
	cs, err := b.Charts(ctx, q)
	if err != nil {
		return env.fail("charts", err, false)
	}
	if *asJSON {
		return env.printJSON("charts", cs)
	}
	if len(cs.Points) == 0 {
		fmt.Fprintf(env.stdout, "# no points for %s over the last %s (the daemon samples every %d s)\n", cs.Key, cs.Range, server.ChartResFine)
		return exitOK
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TIME\tACTIVE\tCONN/S\tPACKETS/S\tBYTES/S\t")
	for _, p := range cs.Points {
		fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%.1f\t%.0f\t\n", time.Unix(p.T, 0).Local().Format(time.DateTime), p.Active, p.CPS, p.PPS, p.BPS)
	}
	tw.Flush()
	return exitOK
}
