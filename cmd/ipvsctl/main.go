// Command ipvsctl drives Linux IPVS load-balancing directors.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
)

// command is one subcommand: it parses its own flags and returns an exit status.
// Help, the man page and shell completion are made from this table and from
// the flag sets the verbs build (see probe), so a verb added here is
// documented and completes without more work.
type command struct {
	// summary says what the verb is for; it names none of its sub-verbs,
	// since usage and the man page print them after it.
	summary string
	run     func(env *cliEnv, args []string) int
	subs    []string // its sub-verbs (ipvsctl vs add ...), if it has any
	hidden  bool     // left out of usage, help, the man page and completion
	// where says, by sub-verb ("" for the verb itself), where one without
	// a remote form runs; the others call the core, here or with --server
	// over a daemon's API.
	where map[string]runsOn
	// examples is a command line per sub-verb ("" for the verb itself),
	// after "ipvsctl ", that help and the man page show.
	examples map[string]string
}

// runsOn is where a verb runs.
type runsOn int

const (
	// viaCore: the verb calls the core, in this process over the local
	// database (through its daemon when one runs) or, with --server, over
	// a remote daemon's API.
	viaCore runsOn = iota
	// onDirector: only on the director itself (its database, its kernel);
	// with --server or IPVSCTL_SERVER the verb refuses, exit status 2.
	onDirector
	// onRealServer: on the real server being prepared; refuses --server too.
	onRealServer
	// overSSH: here, logging in to the real servers with this machine's SSH
	// settings (no core, no daemon); refuses --server too.
	overSSH
	// anywhere: touches no database and no daemon (help, a script printed).
	anywhere
)

// commands maps each verb to its file's run function.
func commands() map[string]command {
	director, here := map[string]runsOn{"": onDirector}, map[string]runsOn{"": anywhere}
	return map[string]command{
		"apply": {summary: "make the desired state equal to a document, then the kernel match it", run: runApply,
			examples: map[string]string{"": "apply -f state.json"}},
		"diff": {summary: "show what apply would change in the kernel", run: runDiff, examples: map[string]string{"": "diff -f state.json"}},
		"status": {summary: "show the kernel's IPVS table with connections, counters and rates", run: runStatus,
			examples: map[string]string{"": "status --json"}},
		"health": {summary: "show the real servers' health checks and their recent transitions", run: runHealth,
			examples: map[string]string{"": "health web r1"}},
		"realserver": {summary: "prepare real servers for DR/TUN/NAT", run: runRealserver, subs: []string{"push", "verify", "undo", "script", "apply", "tune"},
			where: map[string]runsOn{"script": anywhere, "apply": onRealServer},
			examples: map[string]string{
				"push":   "realserver push --rip 198.18.0.11,198.18.0.12 --vip 198.18.0.100 --mode dr-sysctl",
				"verify": "realserver verify --rip 198.18.0.11 --vip 198.18.0.100 --mode dr-sysctl",
				"undo":   "realserver undo --rip 198.18.0.11 --vip 198.18.0.100 --mode dr-sysctl",
				"script": "realserver script --rip 198.18.0.11 --vip 198.18.0.100 --mode dr-sysctl",
				"apply":  "realserver apply --vip 198.18.0.100 --mode dr-sysctl",
				"tune":   "realserver tune check --rip 198.18.0.11",
			}},
		"serve": {summary: "the daemon: restore, then keep the kernel matching the stored state", run: runServe, where: director,
			examples: map[string]string{"": "serve --listen :3636 --tls-self-signed"}},
		"restore": {summary: "boot-time restore: stored desired state -> kernel (modules, sysctls, VIPs, services)", run: runRestore, where: director,
			examples: map[string]string{"": "restore"}},
		"vs": {summary: "virtual services in the desired state", run: runVS, subs: []string{"add", "set", "rm", "list", "enable", "disable"},
			examples: map[string]string{
				"add": "vs add web --address 198.18.0.100 --port 80 --scheduler wrr", "set": "vs set web --scheduler rr", "rm": "vs rm web",
				"list": "vs list --json", "enable": "vs enable web", "disable": "vs disable web",
			}},
		"rs": {summary: "real servers in the desired state", run: runRS, subs: []string{"add", "set", "rm", "list", "drain", "enable", "disable"},
			examples: map[string]string{
				"add": "rs add web --name r1 --address 198.18.0.11 --weight 3", "set": "rs set web r1 --weight 5", "rm": "rs rm web r1",
				"list": "rs list web", "drain": "rs drain web r1", "enable": "rs enable web r1", "disable": "rs disable web r1",
			}},
		"why": {summary: "say why a real server is not getting traffic, every check with its reason", run: runWhy,
			examples: map[string]string{"": "why web r1 --json"}},
		"settings": {summary: "the desired state's global settings", run: runSettings, subs: []string{"show", "set"},
			examples: map[string]string{"show": "settings show --json", "set": "settings set --retire-timeout 60"}},
		"draft": {summary: "staged desired states (the panel's, or the verbs' --draft)", run: runDraft,
			subs: []string{"list", "show", "diff", "start", "apply", "discard"},
			examples: map[string]string{"list": "draft list", "show": "draft show --user bob", "diff": "draft diff --json", "start": "draft start",
				"apply": "draft apply", "discard": "draft discard"}},
		"tune": {summary: "the director's kernel settings, weighed against its state and load", run: runTune,
			subs: []string{"check", "apply", "undo"}, where: map[string]runsOn{"check": onDirector, "apply": onDirector, "undo": onDirector},
			examples: map[string]string{"check": "tune check --json", "apply": "tune apply", "undo": "tune undo"}},
		"loadtest": {summary: "a load test's runs, with their figures, marked for the panel's charts", run: runLoadtest,
			subs: []string{"start", "end", "list"},
			examples: map[string]string{"start": "loadtest start --test lab --phase default --service web",
				"end": "loadtest end 1 --rps 850 --p50 60ms --p99 410ms --cpu 93 --softirq 21 --entries 1019 --buckets 8192", "list": "loadtest list"}},
		"history": {summary: "list the revisions of the desired state, or show one", run: runHistory, examples: map[string]string{"": "history 7"}},
		"events": {summary: "print what the director told of (real servers down and back, VRRP, BGP, revisions), or follow it", run: runEvents,
			examples: map[string]string{"": "events --follow --type realserver."}},
		"rollback": {summary: "return to a revision's desired state and reconcile", run: runRollback, examples: map[string]string{"": "rollback 7"}},
		"export": {summary: "print the desired state as JSON, an ipvsadm -R script, Piranha's lvs.cf, keepalived.conf or ldirectord.cf", run: runExport,
			examples: map[string]string{"": "export --format ipvsadm"}},
		"import": {summary: "replace the desired state with a JSON, ipvsadm -S, lvs.cf, keepalived.conf or ldirectord.cf file", run: runImport,
			examples: map[string]string{"": "import --format lvs.cf lvs.cf"}},
		"user": {summary: "users of the panel and the API", run: runUser, subs: []string{"add", "passwd", "set", "rm", "list"},
			examples: map[string]string{
				"add": "user add bob --role operator --password-stdin", "passwd": "user passwd bob --password-stdin",
				"set": "user set bob --role viewer", "rm": "user rm bob", "list": "user list --json",
			}},
		"token": {summary: "API tokens", run: runToken, subs: []string{"create", "list", "revoke"},
			examples: map[string]string{"create": "token create --user bob --name deploy --expires 90d", "list": "token list", "revoke": "token revoke deploy"}},
		"charts": {summary: "print the series the panel charts for a virtual service or real server", run: runCharts,
			examples: map[string]string{"": "charts web r1 --range day --json"}},
		"audit": {summary: "list the audit record: every change and every login attempt", run: runAudit,
			examples: map[string]string{"": "audit --actor bob --since 24h"}},
		"node": {summary: "this director's own settings (VRRP priority, role, peer, replication source or follower; BGP router ID and source) and its place in the BGP group", run: runNode, subs: []string{"set", "show", "drain", "undrain"},
			examples: map[string]string{"set": "node set --priority 150", "show": "node show --json", "drain": "node drain", "undrain": "node undrain"}},
		"version": {summary: "print the version, the commit and the Go version", run: runVersion, where: here},
		"help":    {summary: "show a command's synopsis, description and flags", run: runHelp, where: here},
		"completion": {summary: "print the shell completion script for a shell", run: runCompletion, subs: []string{"bash", "zsh", "fish"},
			where: map[string]runsOn{"bash": anywhere, "zsh": anywhere, "fish": anywhere}},
		"man": {summary: "print the manual page (roff), made from the same text as help", run: runMan, where: here},
		"__complete": {summary: "complete a command line for the shell scripts", run: runComplete, hidden: true, where: here,
			examples: map[string]string{"": "__complete services"}},
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
	if args[0] == "serve" {
		serveProcs(env.getenv)
	}
	env.cmd = &cmd
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

// serveProcs gives the daemon two Ps where Go would take one (one CPU, or
// a cgroup's limit of one), unless GOMAXPROCS is set. Measured in the VM
// with the daemon pinned to one emulated CPU (docs/performance.md, Health
// checks): with one P, 10,000 tcp targets got 0.39 runs a second each at
// 209 µs of CPU per check; with two, 0.94 at 84 µs, and at 1,000 targets
// 151 µs per check against 103.
func serveProcs(getenv func(string) string) {
	if getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
}
