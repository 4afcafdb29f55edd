package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
)

func runAudit(env *cliEnv, args []string) int {
	fs, db := env.newFlagSet("audit", "[--limit N] [--actor A] [--action X] [--since T] [--json]",
		"List the audit record, newest first: every change (who, when, from which address, through which\n"+
			"interface, the revision it made) and every login attempt, success or failure.")
	limit := fs.Int("limit", 50, "how many entries to list")
	actor := fs.String("actor", "", "only entries by this user (or OS user, for the CLI)")
	action := fs.String("action", "", `only this action, e.g. login, "user add", "token revoke"`)
	since := fs.String("since", "", "only entries since a time (RFC 3339) or for a past duration (24h)")
	asJSON := fs.Bool("json", false, "print JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl audit: takes no arguments")
		return exitUsage
	}
	if *limit < 1 {
		return env.fail("audit", &auth.InvalidError{Field: "limit", Message: strconv.Itoa(*limit) + " is not a positive number"}, true)
	}
	f := server.AuditFilter{Actor: *actor, Action: *action, Limit: *limit}
	if *since != "" {
		if d, err := time.ParseDuration(*since); err == nil && d > 0 {
			f.Since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, *since); err == nil {
			f.Since = t
		} else {
			return env.fail("audit", &auth.InvalidError{Field: "since", Message: fmt.Sprintf("%q is neither an RFC 3339 time nor a duration", *since)}, true)
		}
	}
	ctx := context.Background()
	b, err := env.backend(ctx, db)
	if err != nil {
		return env.fail("audit", err, false)
	}
	defer b.close()
	entries, err := b.Audit(ctx, f)
	if err != nil {
		return env.fail("audit", err, false)
	}
	if *asJSON {
		return env.printJSON("audit", entries)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WHEN\tWHO\tVIA\tFROM\tACTION\tTARGET\tREV\tOUTCOME\tDETAIL")
	for _, e := range entries {
		rev := "-"
		if e.Revision != nil {
			rev = strconv.FormatInt(*e.Revision, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At.Local().Format(time.DateTime), e.Actor, e.Via,
			orDefault(e.ClientAddr, "local"), e.Action, orDefault(e.Target, "-"), rev, e.Outcome, e.Detail+repeats(e))
	}
	tw.Flush()
	return exitOK
}

// repeats says how many attempts an aggregated row stands for.
func repeats(e server.AuditEntry) string {
	if e.Repeats <= 1 || e.LastAt == nil {
		return ""
	}
	return fmt.Sprintf(" (x%d, the last at %s)", e.Repeats, e.LastAt.Local().Format(time.DateTime))
}
