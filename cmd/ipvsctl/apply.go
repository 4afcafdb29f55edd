package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// writeOpts are the flags every writing verb shares.
type writeOpts struct {
	noApply, noWait, asJSON, verbose bool
	base                             int64 // 0: replace whatever is current
}

func (o *writeOpts) register(fs interface {
	BoolVar(*bool, string, bool, string)
}) {
	fs.BoolVar(&o.noApply, "no-apply", false, "only store the change; do not touch the kernel")
	fs.BoolVar(&o.noWait, "no-wait", false, "do not wait for draining real servers; a later reconcile deletes them")
	fs.BoolVar(&o.asJSON, "json", false, "print the result as JSON")
	fs.BoolVar(&o.verbose, "v", false, fmt.Sprintf("list every kernel change (past %d they are counted)", maxListedChanges))
}

func runApply(env *cliEnv, args []string) int {
	fs, db := env.newFlagSet("apply", "-f FILE [--no-apply] [--no-wait] [--json]",
		"Replace the desired state with the document (stored as a new revision), then make the kernel's IPVS\n"+
			"table, VIPs and fwmark rules match it. Removed real servers with active connections are drained at\n"+
			"weight 0 first; apply waits for them (up to settings.drain_timeout) unless --no-wait.")
	file := fs.String("f", "", "desired-state JSON document (- for stdin)")
	var o writeOpts
	o.register(fs)
	fs.Int64Var(&o.base, "base", 0, "refuse unless the stored state is still at this revision (the one the document was made from)")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if *file == "" || fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl apply: -f FILE is required and no other arguments are taken")
		return exitUsage
	}
	// The kernel table and the stored document are read while the new
	// document is decoded.
	wait := env.openKernel
	if !o.noApply {
		wait = env.prefetch(context.Background())
	}
	stored := env.readStored(context.Background(), *db)
	doc, desired, err := readDocument(*file)
	if err != nil {
		if sd, err := stored(); err == nil {
			sd.st.Close()
		}
		return env.fail("apply", err, isInvalid(err))
	}
	return env.replaceAndReconcile("apply", "apply -f "+*file, o, doc, desired, wait, stored)
}

// storedDoc is the state database with its current document, as read when a
// write began; parsed splits the document (in the background).
type storedDoc struct {
	st     *store.Store
	base   int64
	doc    []byte
	parsed func() (*ipvsmgr.StoredState, error)
}

// readStored opens the database and reads its current document in the
// background; the returned function waits for it.
func (env *cliEnv) readStored(ctx context.Context, db string) func() (*storedDoc, error) {
	ch := make(chan error, 1)
	sd := &storedDoc{}
	go func() {
		st, err := env.openStore(ctx, db)
		if err != nil {
			ch <- err
			return
		}
		sd.st = st
		sd.base, sd.doc, err = st.CurrentDocument(ctx)
		if err != nil {
			st.Close()
		}
		parsed := make(chan struct{})
		var was *ipvsmgr.StoredState
		var perr error
		sd.parsed = func() (*ipvsmgr.StoredState, error) { <-parsed; return was, perr }
		ch <- err
		if err == nil {
			was, perr = ipvsmgr.ParseStored(sd.doc)
		}
		close(parsed)
	}()
	return func() (*storedDoc, error) {
		if err := <-ch; err != nil {
			return nil, err
		}
		return sd, nil
	}
}

// replaceAndReconcile stores doc as the whole desired state (a new revision
// unless it equals the current one), then makes the kernel match it.
// wait gives the kernel (opened, and its table read, ahead).
// stored gives the database and its document as read when the write began
// (readStored).
func (env *cliEnv) replaceAndReconcile(verb, label string, o writeOpts, doc *ipvsmgr.State, desired *ipvsmgr.Desired,
	wait func() (*kernelConn, error), stored func() (*storedDoc, error)) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	sd, err := stored()
	if err != nil {
		return env.fail(verb, err, false)
	}
	st := sd.st
	defer st.Close()
	enc, encServices, err := store.EncodeServices(doc)
	if err != nil {
		return env.fail(verb, err, false)
	}
	for attempt := 0; ; attempt++ {
		base, cur, parsed := sd.base, sd.doc, sd.parsed
		if attempt > 0 { // another writer got in between: read again
			if base, cur, err = st.CurrentDocument(ctx); err != nil {
				return env.fail(verb, err, false)
			}
			parsed = func() (*ipvsmgr.StoredState, error) { return ipvsmgr.ParseStored(cur) }
		}
		if o.base != 0 && o.base != base {
			return env.fail(verb, &store.StaleError{Base: o.base, Current: base}, false)
		}
		if base != 0 && bytes.Equal(cur, enc) {
			env.reportCommit(base, false, o)
			break
		}
		was, err := parsed()
		if err != nil {
			return env.fail(verb, err, false)
		}
		changes, prevDelta, err := was.ChangesTo(encServices, doc)
		if err != nil {
			return env.fail(verb, err, false)
		}
		rev, changed, err := st.CommitDocument(ctx, base, enc, prevDelta, env.author(), "cli", label+": "+ipvsmgr.Summary(changes))
		var stale *store.StaleError
		if errors.As(err, &stale) && attempt < 50 {
			continue // another writer got in between: describe the change again
		}
		if err != nil {
			return env.fail(verb, err, false)
		}
		env.reportCommit(rev, changed, o)
		break
	}
	return env.reconcileStored(ctx, verb, st, wait, desired, o)
}

func (env *cliEnv) reportCommit(rev int64, changed bool, o writeOpts) {
	if o.asJSON {
		return
	}
	if changed {
		fmt.Fprintf(env.stderr, "stored revision %d\n", rev)
	} else {
		fmt.Fprintf(env.stderr, "desired state unchanged (revision %d)\n", rev)
	}
}

// commitAndReconcile changes the stored desired state with change (retried
// on a concurrent write), refuses a result that does not validate, then makes
// the kernel match the stored state unless --no-apply.
func (env *cliEnv) commitAndReconcile(verb, db string, o writeOpts, change func(cur *ipvsmgr.State) (string, error)) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The kernel table is read while the change is made and stored.
	wait := env.openKernel
	if !o.noApply {
		wait = env.prefetch(ctx)
	}
	st, err := env.openStore(ctx, db)
	if err != nil {
		return env.fail(verb, err, false)
	}
	defer st.Close()
	var desired *ipvsmgr.Desired
	rev, changed, err := st.Update(ctx, env.author(), "cli", func(cur *ipvsmgr.State) (string, error) {
		summary, err := change(cur)
		if err != nil {
			return "", err
		}
		if desired, err = ipvsmgr.Compile(cur); err != nil {
			return "", err
		}
		return summary, nil
	})
	if err != nil {
		return env.fail(verb, err, isInvalid(err))
	}
	env.reportCommit(rev, changed, o)
	return env.reconcileStored(ctx, verb, st, wait, desired, o)
}

// reconcileStored makes the kernel match desired, now stored, unless
// --no-apply; wait gives the kernel (opened ahead, or now).
func (env *cliEnv) reconcileStored(ctx context.Context, verb string, st *store.Store, wait func() (*kernelConn, error), desired *ipvsmgr.Desired, o writeOpts) int {
	if o.noApply {
		return exitOK
	}
	kc, err := wait()
	if err != nil {
		return env.fail(verb, err, false)
	}
	defer kc.close()
	return env.reconcile(ctx, verb, kc.reconciler(st, env.logger(slog.LevelWarn)), desired, o)
}

// reconcile makes the kernel match desired, waiting for drains unless told not to.
func (env *cliEnv) reconcile(ctx context.Context, verb string, rec *ipvsmgr.Reconciler, desired *ipvsmgr.Desired, o writeOpts) int {
	res, err := rec.Reconcile(ctx, desired)
	if err != nil {
		return env.fail(verb, err, false)
	}
	total := *res
	for !o.noWait && len(res.Draining) > 0 && ctx.Err() == nil {
		if !o.asJSON {
			for _, d := range res.Draining {
				fmt.Fprintf(env.stderr, "draining %s from %s: %d active connections\n", d.Dest, d.Service, d.ActiveConns)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		if res, err = rec.Reconcile(ctx, desired); err != nil {
			return env.fail(verb, err, false)
		}
		total.Applied = append(total.Applied, res.Applied...)
		total.Changes = append(total.Changes, res.Changes...)
		total.Failures = append(total.Failures, res.Failures...)
		total.Draining = res.Draining
	}
	printResult(env, &total, o.asJSON, o.verbose)
	if len(total.Failures) > 0 {
		return exitFail
	}
	return exitOK
}

func printResult(env *cliEnv, res *ipvsmgr.Result, asJSON, verbose bool) {
	if asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
		return
	}
	if len(res.Changes) <= maxListedChanges || verbose {
		for _, c := range res.Changes {
			fmt.Fprintln(env.stdout, c)
		}
	} else {
		fmt.Fprintln(env.stdout, changeCounts(res.Applied))
	}
	for _, f := range res.Failures {
		fmt.Fprintf(env.stderr, "failed: %s: %s: %s\n", f.Service, f.Change, f.Err)
	}
	for _, d := range res.Draining {
		fmt.Fprintf(env.stdout, "draining %s from %s: %d active connections\n", d.Dest, d.Service, d.ActiveConns)
	}
	fmt.Fprintf(env.stdout, "%d changes applied, %d failed\n", len(res.Changes), len(res.Failures))
}

// usageError is an error in what the user asked for (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

func isInvalid(err error) bool {
	var ve *ipvsmgr.ValidationError
	var ue *usageError
	return errors.As(err, &ve) || errors.As(err, &ue)
}

// maxListedChanges bounds the changes apply lists one per line; past it, it
// counts them by kind (-v lists them all).
const maxListedChanges = 50

func changeCounts(ops []ipvsmgr.Op) string {
	var n [ipvsmgr.OpSetTimeouts + 1]int
	for _, op := range ops {
		n[op.Kind]++
	}
	return fmt.Sprintf("services: %d added, %d edited, %d deleted; real servers: %d added, %d edited, %d deleted (-v lists each change)",
		n[ipvsmgr.OpAddService], n[ipvsmgr.OpEditService], n[ipvsmgr.OpDelService], n[ipvsmgr.OpAddDest], n[ipvsmgr.OpEditDest], n[ipvsmgr.OpDelDest])
}
