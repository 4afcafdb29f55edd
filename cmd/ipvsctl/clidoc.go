package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

//go:generate go test . -count=1 -run ^TestCLIReference$ -update

// cliDocPath is where the CLI reference is kept, from this package's directory.
const cliDocPath = "../../docs/cli.md"

// cliSeeAlso names, per verb, the docs page that shows it at work.
var cliSeeAlso = map[string]string{
	"apply": "state.md#apply-it-and-see-what-would-change", "diff": "state.md#apply-it-and-see-what-would-change",
	"events": "events.md", "history": "state.md#revisions-history-and-rollback", "rollback": "state.md#revisions-history-and-rollback",
	"vs": "state.md#change-one-thing", "rs": "state.md#change-one-thing", "why": "state.md#change-one-thing",
	"settings": "state.md#change-one-thing", "draft": "state.md#drafts-several-edits-as-one-revision",
	"status": "health-checks.md#seeing-the-health", "health": "health-checks.md#seeing-the-health",
	"serve": "install.md#the-daemon-ipvsctl-serve", "restore": "install.md#boot-time-restore-without-the-daemon",
	"version": "install.md#version-help-the-man-page-and-completions", "help": "install.md#version-help-the-man-page-and-completions",
	"man": "install.md#version-help-the-man-page-and-completions", "completion": "install.md#version-help-the-man-page-and-completions",
	"realserver": "getting-started.md#preparing-the-real-servers", "tune": "tuning.md#the-director-ipvsctl-tune",
	"loadtest": "tuning.md#the-load-test", "export": "migrating.md#exporting", "import": "migrating.md",
	"user": "security.md#users-api-tokens-and-the-audit-record", "token": "security.md#users-api-tokens-and-the-audit-record",
	"audit": "security.md#users-api-tokens-and-the-audit-record", "charts": "panel.md#each-screen-in-a-real-browser",
	"node": "pair.md#this-directors-own-settings",
}

// whereText says, in the reference, where a verb with no remote form runs.
var whereText = map[runsOn]string{
	onDirector:   "Runs on the director itself (its own database and kernel); refuses `--server`.",
	onRealServer: "Runs on the real server being prepared; refuses `--server`.",
	overSSH:      "Runs on the machine that logs in to the real servers over SSH; refuses `--server`.",
	anywhere:     "Touches no database and no daemon: runs anywhere.",
}

const cliDocIntro = `# The CLI reference

<!-- Generated from cmd/ipvsctl's command table (the one that makes help, the man page and the completions)
by go generate ./cmd/ipvsctl; TestCLIReference fails when this file and the table disagree. Do not edit. -->

Every verb, its sub-verbs and their flags, as ` + "`ipvsctl help VERB`" + ` and ` + "`man 8 ipvsctl`" + ` print them. How
the verbs are used together is in the pages by task (each verb links to its own).

- Global flags, on every verb: ` + "`--db PATH`" + ` (env ` + "`IPVSCTL_DB`" + `, default ` + "`/var/lib/ipvsctl/ipvsctl.db`" + `): the
  SQLite state database; ` + "`--server URL`" + ` and ` + "`--token T`" + ` (env ` + "`IPVSCTL_SERVER`" + `, ` + "`IPVSCTL_TOKEN`" + `): send the verb
  to a remote daemon's API, with the same output and exit status as on the director, never touching a local
  database; ` + "`--ca-cert FILE`" + ` (env ` + "`IPVSCTL_CA_CERT`" + `): the certificate an https ` + "`--server`" + ` must show or
  chain to (a director's ` + "`/var/lib/ipvsctl/tls-self-signed.crt`" + `, or its CA), instead of the system's roots.
- Exit status 0 on success, 1 on failure, 2 on bad usage or invalid input (every invalid field is named with its
  value).
- Every writing verb takes ` + "`--no-apply`" + ` (only store), ` + "`--no-wait`" + ` (do not wait for retiring servers), ` + "`--json`" + `
  and ` + "`-v`" + ` (list every kernel change; past 50 they are counted by kind). On a terminal, long operations show
  their progress on one line (a retiring server's connections counting down, ` + "`realserver push`" + ` to many
  servers as done/failed counts, a large import's services as they are read); off a terminal or with ` + "`--json`" + `
  they stay quiet.
- SERVICE is a service's name, ` + "`PROTO:ADDRESS:PORT`" + ` or ` + "`fwmark:N`" + `; SERVER a real server's name, ` + "`ADDRESS`" + ` or
  ` + "`ADDRESS:PORT`" + `.
- On the director, a verb goes through the running daemon's socket; without a daemon the CLI reconciles itself,
  under a lock. Verbs with no remote form say where they run, below.
`

// writeCLIReference writes docs/cli.md from the command table: each visible
// verb, its sub-verbs with their synopsis, summary, example and own flags.
func writeCLIReference(w io.Writer, cmds map[string]command) {
	fmt.Fprint(w, cliDocIntro)
	names := visibleVerbs(cmds)
	links := make([]string, len(names))
	for i, n := range names {
		links[i] = fmt.Sprintf("[%s](#%s)", n, n)
	}
	fmt.Fprintf(w, "\nVerbs: %s.\n", strings.Join(links, ", "))
	for _, name := range names {
		cmd := cmds[name]
		fmt.Fprintf(w, "\n## %s\n\n%s.", name, capitalize(cmd.summary))
		if see, ok := cliSeeAlso[name]; ok {
			fmt.Fprintf(w, " See [%s](%s).", strings.TrimSuffix(strings.SplitN(see, "#", 2)[0], ".md"), see)
		}
		fmt.Fprintln(w)
		subs := cmd.subs
		if len(subs) == 0 {
			subs = []string{""}
		}
		for _, sub := range subs {
			d := probeVerb(cmd, sub)
			if d == nil {
				continue
			}
			if sub != "" {
				fmt.Fprintf(w, "\n### %s\n", d.Path)
			}
			fmt.Fprintf(w, "\n    ipvsctl %s\n\n%s\n", strings.TrimSpace(d.Path+" "+d.Synopsis), d.Summary)
			if t, ok := whereText[cmd.where[sub]]; ok {
				fmt.Fprintf(w, "\n%s\n", t)
			}
			if d.Example != "" {
				fmt.Fprintf(w, "\nExample: `ipvsctl %s`\n", d.Example)
			}
			writeCLIFlags(w, d)
		}
	}
}

// writeCLIFlags writes a verb's own flags as a table (the global ones are in the intro).
func writeCLIFlags(w io.Writer, d *verbDoc) {
	var rows []string
	d.Flags.VisitAll(func(f *flag.Flag) {
		if isGlobalFlag(f.Name) {
			return
		}
		name, usage := flag.UnquoteUsage(f)
		arg := ""
		if name != "" {
			arg = " " + strings.ToUpper(name)
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			def = "`" + f.DefValue + "`"
		}
		rows = append(rows, fmt.Sprintf("| `%s%s` | %s | %s |", dashed(f.Name), arg, cell(usage), def))
	})
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n| flag | what | default |\n| --- | --- | --- |\n%s\n", strings.Join(rows, "\n"))
}

// cell is text made safe for one cell of a Markdown table.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), "|", `\|`)
}
