package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

func runApply(env *cliEnv, args []string) int {
	fs, db := env.newFlagSet("apply", "-f FILE [--no-wait] [--json]",
		"Make the kernel's IPVS table, VIPs and fwmark rules match the desired-state document.\n"+
			"Removed real servers with active connections are drained at weight 0 first; apply waits\n"+
			"for them (up to settings.drain_timeout) unless --no-wait.")
	file := fs.String("f", "", "desired-state JSON document (- for stdin)")
	noWait := fs.Bool("no-wait", false, "do not wait for draining real servers; a later apply deletes them")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if *file == "" || fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl apply: -f FILE is required and no other arguments are taken")
		return exitUsage
	}
	desired, err := readState(*file)
	if err != nil {
		return env.fail("apply", err, isInvalid(err))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rec, closeKernel, err := env.reconciler(*db, env.logger(slog.LevelWarn))
	if err != nil {
		return env.fail("apply", err, false)
	}
	defer closeKernel()
	res, err := rec.Reconcile(ctx, desired)
	if err != nil {
		return env.fail("apply", err, false)
	}
	total := *res
	for !*noWait && len(res.Draining) > 0 && ctx.Err() == nil {
		if !*asJSON {
			for _, d := range res.Draining {
				fmt.Fprintf(env.stderr, "draining %s from %s: %d active connections\n", d.Dest, d.Service, d.ActiveConns)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		if res, err = rec.Reconcile(ctx, desired); err != nil {
			return env.fail("apply", err, false)
		}
		total.Changes = append(total.Changes, res.Changes...)
		total.Failures = append(total.Failures, res.Failures...)
		total.Draining = res.Draining
	}
	printResult(env, &total, *asJSON)
	if len(total.Failures) > 0 {
		return exitFail
	}
	return exitOK
}

func printResult(env *cliEnv, res *ipvsmgr.Result, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
		return
	}
	for _, c := range res.Changes {
		fmt.Fprintln(env.stdout, c)
	}
	for _, f := range res.Failures {
		fmt.Fprintf(env.stderr, "failed: %s: %s: %s\n", f.Service, f.Change, f.Err)
	}
	for _, d := range res.Draining {
		fmt.Fprintf(env.stdout, "draining %s from %s: %d active connections\n", d.Dest, d.Service, d.ActiveConns)
	}
	fmt.Fprintf(env.stdout, "%d changes applied, %d failed\n", len(res.Changes), len(res.Failures))
}

func isInvalid(err error) bool {
	var ve *ipvsmgr.ValidationError
	return errors.As(err, &ve)
}
