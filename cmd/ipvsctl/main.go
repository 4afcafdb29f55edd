// Command ipvsctl drives Linux IPVS load-balancing directors.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"
)

// command is one subcommand: it parses its own flags and returns an exit status.
// Help, the man page and shell completion are made from this table and from
// the flag sets the verbs build (see probe), so a verb added here is
// documented and completes without more work.
type command struct {
	summary string
	run     func(env *cliEnv, args []string) int
	subs    []string // its sub-verbs (ipvsctl vs add ...), if it has any
	hidden  bool     // left out of usage, help, the man page and completion
}

// commands maps each verb to its file's run function.
func commands() map[string]command {
	return map[string]command{
		"apply":      {summary: "make the desired state equal to a document, then the kernel match it", run: runApply},
		"diff":       {summary: "show what apply would change in the kernel", run: runDiff},
		"status":     {summary: "show the kernel's IPVS table with connections, counters and rates", run: runStatus},
		"health":     {summary: "show the real servers' health checks and their recent transitions", run: runHealth},
		"realserver": {summary: "prepare real servers for DR/TUN/NAT", run: runRealserver, subs: []string{"push", "verify", "undo", "script", "apply", "tune"}},
		"serve":      {summary: "the daemon: restore, then keep the kernel matching the stored state", run: runServe},
		"restore":    {summary: "boot-time restore: stored desired state -> kernel (modules, sysctls, VIPs, services)", run: runRestore},
		"vs":         {summary: "virtual services in the desired state", run: runVS, subs: []string{"add", "set", "rm", "list", "enable", "disable"}},
		"rs":         {summary: "real servers in the desired state", run: runRS, subs: []string{"add", "set", "rm", "list", "drain", "enable", "disable"}},
		"history":    {summary: "list the revisions of the desired state, or show one", run: runHistory},
		"rollback":   {summary: "return to a revision's desired state and reconcile", run: runRollback},
		"export":     {summary: "print the desired state as JSON, an ipvsadm -R script or Piranha's lvs.cf", run: runExport},
		"import":     {summary: "replace the desired state with a JSON, ipvsadm -S, lvs.cf or keepalived.conf file", run: runImport},
		"user":       {summary: "users of the panel and the API", run: runUser, subs: []string{"add", "passwd", "set", "rm", "list"}},
		"token":      {summary: "API tokens", run: runToken, subs: []string{"create", "list", "revoke"}},
		"audit":      {summary: "list the audit record: every change and every login attempt", run: runAudit},
		"node":       {summary: "this director's own redundancy settings (priority, role, peer)", run: runNode, subs: []string{"set", "show"}},
		"tune":       {summary: "check the director's kernel settings against its state and load; apply or undo them", run: runTune, subs: []string{"check", "apply", "undo"}},
		"version":    {summary: "print the version, the commit and the Go version", run: runVersion},
		"help":       {summary: "show a command's synopsis, description and flags", run: runHelp},
		"completion": {summary: "print the shell completion script for bash, zsh or fish", run: runCompletion, subs: []string{"bash", "zsh", "fish"}},
		"man":        {summary: "print the manual page (roff), made from the same text as help", run: runMan},
		"__complete": {summary: "complete a command line for the shell scripts", run: runComplete, hidden: true},
	}
}

func main() {
	env := &cliEnv{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin, getenv: os.Getenv}
	os.Exit(dispatch(env, os.Args[1:]))
}

func dispatch(env *cliEnv, args []string) int {
	cmds := commands()
	// Global flags may come before the verb: ipvsctl --db PATH VERB ...
	var global []string
	for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' {
		switch {
		case args[0] == "-h" || args[0] == "--help" || args[0] == "help":
			usage(env.stdout, cmds)
			return exitOK
		case takesValue(args[0]) && len(args) > 1:
			global = append(global, args[0], args[1])
			args = args[2:]
		default:
			global = append(global, args[0])
			args = args[1:]
		}
	}
	if len(args) == 0 {
		usage(env.stderr, cmds)
		return exitUsage
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(env.stderr, "ipvsctl: unknown command %q\n", args[0])
		usage(env.stderr, cmds)
		return exitUsage
	}
	if args[0] != "serve" && env.getenv("GOGC") == "" {
		// A command lives for a moment: collecting garbage less often makes
		// one on a large table faster. The daemon keeps Go's default.
		debug.SetGCPercent(400)
	}
	return cmd.run(env, append(global, args[1:]...))
}

// describe is the summary with the sub-verbs, as usage lists it.
func (c command) describe() string {
	if len(c.subs) == 0 {
		return c.summary
	}
	return c.summary + ": " + strings.Join(c.subs, "|")
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: ipvsctl [--db PATH] COMMAND [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !cmds[n].hidden {
			fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].describe())
		}
	}
	fmt.Fprintln(w, "\nRun 'ipvsctl help COMMAND' (or 'ipvsctl COMMAND --help') for a command's flags.")
}
