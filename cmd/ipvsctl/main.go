// Command ipvsctl drives Linux IPVS load-balancing directors.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
)

// command is one subcommand: it parses its own flags and returns an exit status.
type command struct {
	summary string
	run     func(env *cliEnv, args []string) int
}

// commands maps each verb to its file's run function.
func commands() map[string]command {
	return map[string]command{
		"apply":      {"make the desired state equal to a document, then the kernel match it", runApply},
		"diff":       {"show what apply would change in the kernel", runDiff},
		"status":     {"show the kernel's IPVS table with connections, counters and rates", runStatus},
		"realserver": {"prepare real servers for DR/TUN/NAT: push|verify|undo|script|apply", runRealserver},
		"serve":      {"the daemon: restore, then keep the kernel matching the stored state", runServe},
		"restore":    {"boot-time restore: stored desired state -> kernel (modules, sysctls, VIPs, services)", runRestore},
		"vs":         {"virtual services in the desired state: add|set|rm|list|enable|disable", runVS},
		"rs":         {"real servers in the desired state: add|set|rm|list|drain|enable|disable", runRS},
		"history":    {"list the revisions of the desired state, or show one", runHistory},
		"rollback":   {"return to a revision's desired state and reconcile", runRollback},
		"export":     {"print the desired state as JSON, an ipvsadm -R script or Piranha's lvs.cf", runExport},
		"import":     {"replace the desired state with a JSON, ipvsadm -S, lvs.cf or keepalived.conf file", runImport},
		"user":       {"users of the panel and the API: add|passwd|set|rm|list", runUser},
		"token":      {"API tokens: create|list|revoke", runToken},
		"audit":      {"list the audit record: every change and every login attempt", runAudit},
		"version":    {"print the version, the commit and the Go version", runVersion},
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
	if len(args) == 0 || args[0] == "help" {
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

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: ipvsctl [--db PATH] COMMAND [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'ipvsctl COMMAND --help' for a command's flags.")
}
