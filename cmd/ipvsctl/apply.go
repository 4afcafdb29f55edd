package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/term"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

const levelWarn = slog.LevelWarn

// writeOpts are the flags every writing verb shares.
type writeOpts struct {
	noApply, noWait, asJSON, verbose bool
	base                             int64 // 0: replace whatever is current
	draft                            bool  // stage in the caller's draft instead (registerDraft)
}

// registerDraft adds --draft, for the verbs whose change is an edit (vs,
// rs, settings): a draft is per author, so the flag names none.
func (o *writeOpts) registerDraft(fs interface {
	BoolVar(*bool, string, bool, string)
}) {
	fs.BoolVar(&o.draft, "draft", false, "stage the change in your draft (started from the current state) instead of storing it; see ipvsctl draft diff|apply")
}

func (o *writeOpts) register(fs interface {
	BoolVar(*bool, string, bool, string)
}) {
	fs.BoolVar(&o.noApply, "no-apply", false, "only store the change; do not touch the kernel")
	fs.BoolVar(&o.noWait, "no-wait", false, "do not wait for retiring real servers (removed, at weight 0 until their connections end); a later reconcile deletes them")
	fs.BoolVar(&o.asJSON, "json", false, "print the result as JSON")
	fs.BoolVar(&o.verbose, "v", false, fmt.Sprintf("list every kernel change (past %d they are counted)", maxListedChanges))
}

// options are the core's write options for these flags; on a terminal, and
// without --json, drains in progress count down on one line.
func (env *cliEnv) options(o writeOpts) server.WriteOptions {
	w := server.WriteOptions{NoApply: o.noApply, NoWait: o.noWait, Base: o.base, Draft: o.draft}
	if !o.asJSON && env.isTerminal() {
		w.Progress = env.printRetiring
	}
	return w
}

// isTerminal reports whether stderr, where progress goes, is a terminal.
func (env *cliEnv) isTerminal() bool {
	if env.terminal != nil {
		return env.terminal()
	}
	f, ok := env.stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func runApply(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("apply", "-f FILE [--no-apply] [--no-wait] [--json]",
		"Replace the desired state with the document (stored as a new revision), then make the kernel's IPVS\n"+
			"table, VIPs and fwmark rules match it. Removed real servers with active connections are retired at\n"+
			"weight 0 first; apply waits for them (up to settings.retire_timeout) unless --no-wait.")
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
	return env.write("apply", g, o, func(ctx context.Context, b *backend) (*server.WriteResult, error) {
		f, err := env.openDocument(*file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return b.Apply(ctx, b.actor, f, "apply -f "+*file, env.options(o))
	})
}

// write runs one change through the backend and reports it: the revision,
// then the kernel changes of its reconcile.
func (env *cliEnv) write(verb string, g *globalFlags, o writeOpts, call func(context.Context, *backend) (*server.WriteResult, error)) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail(verb, err, false)
	}
	defer b.close()
	res, err := call(ctx, b)
	env.clearLine()
	if err != nil {
		return env.fail(verb, err, false)
	}
	return env.report(res, o)
}

func (env *cliEnv) report(res *server.WriteResult, o writeOpts) int {
	if res.Draft != nil {
		if o.asJSON {
			return env.printJSON("", res.Draft)
		}
		fmt.Fprintf(env.stderr, "staged in the draft of %s (made on revision %d): ipvsctl draft diff shows it, draft apply stores it\n", res.Draft.Author, res.Draft.Base)
		return exitOK
	}
	if !o.asJSON {
		if res.Changed {
			fmt.Fprintf(env.stderr, "stored revision %d\n", res.Revision)
		} else {
			fmt.Fprintf(env.stderr, "desired state unchanged (revision %d)\n", res.Revision)
		}
	}
	if !res.Applied && len(res.Failures) == 0 {
		if o.asJSON {
			env.printJSON("", res)
		}
		return exitOK
	}
	printResult(env, res, o.asJSON, o.verbose)
	if len(res.Failures) > 0 {
		return exitFail
	}
	return exitOK
}

// printRetiring rewrites one line: the connections left on the retiring real
// servers (clearLine removes it when the wait is over).
func (env *cliEnv) printRetiring(drains []ipvsmgr.Retiring) {
	total := 0
	for _, d := range drains {
		total += int(d.ActiveConns)
	}
	line := fmt.Sprintf("retiring %d real servers: %d active connections left", len(drains), total)
	if len(drains) == 1 {
		line = fmt.Sprintf("retiring %s from %s: %d active connections left", drains[0].Dest, drains[0].Service, total)
	}
	fmt.Fprintf(env.stderr, "\r\033[K%s", line)
	env.progressShown = true
}

// countDone is the progress of an action on many real servers, on one
// line of a terminal: how many are done and how many failed (nil off a
// terminal or with --json).
func (env *cliEnv) countDone(verb string, total int, asJSON bool) func(arpguard.Result) {
	if asJSON || total < 2 || !env.isTerminal() {
		return nil
	}
	var mu sync.Mutex
	done, failed := 0, 0
	return func(r arpguard.Result) {
		mu.Lock()
		defer mu.Unlock()
		done++
		if !r.OK() {
			failed++
		}
		fmt.Fprintf(env.stderr, "\r\033[K%s: %d of %d real servers done, %d failed", verb, done, total, failed)
		env.progressShown = true
	}
}

// clearLine ends a progress line, if one was shown.
func (env *cliEnv) clearLine() {
	if env.progressShown {
		fmt.Fprint(env.stderr, "\r\033[K")
		env.progressShown = false
	}
}

func printResult(env *cliEnv, res *server.WriteResult, asJSON, verbose bool) {
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
		fmt.Fprintln(env.stdout, res.Counts+" (-v lists each change)")
	}
	for _, f := range res.Failures {
		fmt.Fprintf(env.stderr, "failed: %s: %s: %s\n", f.Service, f.Change, f.Err)
	}
	for _, d := range res.Retiring {
		fmt.Fprintf(env.stdout, "retiring %s from %s: %d active connections left\n", d.Dest, d.Service, d.ActiveConns)
	}
	fmt.Fprintf(env.stdout, "%d changes applied, %d failed\n", len(res.Changes), len(res.Failures))
}

// maxListedChanges bounds the changes apply lists one per line; past it, it
// counts them by kind (-v lists them all).
const maxListedChanges = 50
