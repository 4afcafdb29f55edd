package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

func runHistory(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("history", "[REV] [--limit N] [--json]",
		"List the revisions of the desired state (who, when, from which interface, what changed), newest\n"+
			"first; with REV, show that revision's changes one per line.")
	limit := fs.Int("limit", 20, "how many revisions to list")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, st, ok := env.parseInterspersed(fs, args)
	if !ok {
		return st
	}
	ctx := context.Background()
	b, err := env.readBackend(ctx, g)
	if err != nil {
		return env.fail("history", err, false)
	}
	defer b.close()
	if len(pos) == 1 {
		return showRevision(env, b, pos[0], *asJSON)
	}
	if len(pos) > 1 {
		fmt.Fprintln(env.stderr, "ipvsctl history: takes at most one REV")
		return exitUsage
	}
	revs, err := b.History(ctx, *limit)
	if err != nil {
		return env.fail("history", err, false)
	}
	if *asJSON {
		return env.printJSON("history", revs)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REV\tWHEN\tWHO\tVIA\tSUMMARY")
	for _, r := range revs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", r.ID, r.At.Local().Format(time.DateTime), r.Author, r.Via, r.Summary)
	}
	tw.Flush()
	return exitOK
}

func parseRev(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, &server.Error{Code: server.CodeBadInput, Msg: fmt.Sprintf("revision %q is not a revision number", s)}
	}
	return n, nil
}

func showRevision(env *cliEnv, b *backend, arg string, asJSON bool) int {
	id, err := parseRev(arg)
	if err != nil {
		return env.fail("history", err, true)
	}
	r, err := b.Revision(context.Background(), id)
	if err != nil {
		return env.fail("history", err, false)
	}
	if asJSON {
		return env.printJSON("history", r)
	}
	fmt.Fprintf(env.stdout, "revision %d by %s via %s at %s\n%s\n\n", r.ID, r.Author, r.Via, r.At.Local().Format(time.DateTime), r.Summary)
	for _, c := range r.Changes {
		fmt.Fprintln(env.stdout, c)
	}
	return exitOK
}

func runRollback(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("rollback", "REV [--no-apply] [--no-wait] [--json]",
		"Make revision REV's desired state current again (as a new revision), then reconcile the kernel.")
	var o writeOpts
	o.register(fs)
	pos, st, ok := env.parseInterspersed(fs, args)
	if !ok {
		return st
	}
	if len(pos) != 1 {
		fmt.Fprintln(env.stderr, "ipvsctl rollback: want exactly one REV")
		return exitUsage
	}
	id, err := parseRev(pos[0])
	if err != nil {
		return env.fail("rollback", err, true)
	}
	return env.write("rollback", g, o, func(ctx context.Context, b *backend) (*server.WriteResult, error) {
		return b.Rollback(ctx, b.actor, id, env.options(o))
	})
}
