package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// runMan prints ipvsctl(8) in roff, made from the command table and each
// verb's flag set: the text help prints.
func runMan(env *cliEnv, args []string) int {
	fs, _ := env.newFlagSet("man", "", "Print the manual page ipvsctl(8) in roff (man -l - reads it), made from the same text as help.")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		return env.fail("man", fmt.Errorf("unexpected argument %q", fs.Arg(0)), true)
	}
	writeMan(env.stdout, commands(), currentBuild().Version)
	return exitOK
}

func writeMan(w io.Writer, cmds map[string]command, version string) {
	fmt.Fprintf(w, ".TH IPVSCTL 8 \"\" \"ipvsctl %s\" \"System Administration\"\n", roff(version))
	fmt.Fprint(w, `.SH NAME
ipvsctl \- run Linux IPVS load-balancing directors
.SH SYNOPSIS
.B ipvsctl
[\fB\-\-db\fR \fIPATH\fR] [\fB\-\-server\fR \fIURL\fR \fB\-\-token\fR \fITOKEN\fR]
\fICOMMAND\fR [\fIflags\fR]
.SH DESCRIPTION
ipvsctl keeps a director's desired state (virtual services, real servers, settings) in an SQLite database
and makes the kernel's IPVS table, VIPs and fwmark rules match it over generic netlink, editing in place.
.B ipvsctl serve
is the daemon: it restores the state at start, keeps the kernel matching it, and serves the panel, the JSON
API and metrics on port 3636. Every verb runs against the local database (through the daemon when one runs)
or, with \fB\-\-server\fR, against a remote daemon's API.
.SH COMMANDS
`)
	for _, name := range visibleVerbs(cmds) {
		cmd := cmds[name]
		if len(cmd.subs) > 0 {
			fmt.Fprintf(w, ".SS %s\n%s.\n", quoted("ipvsctl "+name+" "+strings.Join(cmd.subs, "|")), roff(capitalize(cmd.summary)))
		}
		subs := cmd.subs
		if len(subs) == 0 {
			subs = []string{""}
		}
		for _, sub := range subs {
			d := probeVerb(cmd, sub)
			if d == nil {
				continue
			}
			if len(cmd.subs) > 0 {
				fmt.Fprintf(w, ".TP\n.B %s\n", quoted("ipvsctl "+d.Path+" "+d.Synopsis))
			} else {
				fmt.Fprintf(w, ".SS %s\n", quoted("ipvsctl "+d.Path+" "+d.Synopsis))
			}
			fmt.Fprintf(w, "%s\n", roff(d.Summary))
			if d.Example != "" {
				fmt.Fprintf(w, ".br\nExample: \\fB%s\\fR\n", roff("ipvsctl "+d.Example))
			}
			writeManFlags(w, d)
		}
	}
	fmt.Fprint(w, `.SH ENVIRONMENT
.TP
.B IPVSCTL_DB
the state database (default /var/lib/ipvsctl/ipvsctl.db)
.TP
.B IPVSCTL_SERVER\fR, \fBIPVSCTL_TOKEN
a remote daemon's URL and an API token, as \fB\-\-server\fR and \fB\-\-token\fR
.TP
.B IPVSCTL_CA_CERT
the PEM certificate an https remote daemon must show or chain to, as \fB\-\-ca\-cert\fR
.SH FILES
.TP
.I /var/lib/ipvsctl/ipvsctl.db
the desired state, its history, users, tokens and the audit record (with \fIipvsctl.db.sock\fR, the
daemon's socket for the local CLI, and \fIipvsctl.db.lock\fR)
.TP
.I /lib/systemd/system/ipvsctl.service\fR, \fI/lib/systemd/system/ipvsctl-restore.service
the daemon, and the one-shot boot restore for directors that run no daemon
.SH EXIT STATUS
0 on success, 1 on failure, 2 on bad usage or invalid input (every invalid field is named with its value).
.SH SEE ALSO
.BR ipvsadm (8),
.BR keepalived (8),
.BR ldirectord (8)
`)
}

// writeManFlags lists a verb's own flags (the global ones are in SYNOPSIS).
func writeManFlags(w io.Writer, d *verbDoc) {
	started := false
	d.Flags.VisitAll(func(f *flag.Flag) {
		if isGlobalFlag(f.Name) {
			return
		}
		name, usage := flag.UnquoteUsage(f)
		arg := ""
		if name != "" {
			arg = " \\fI" + roff(name) + "\\fR"
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			def = " (default " + f.DefValue + ")"
		}
		if !started {
			fmt.Fprintln(w, ".RS")
			started = true
		}
		fmt.Fprintf(w, ".TP\n.B %s%s\n%s\n", roff(dashed(f.Name)), arg, roff(usage+def))
	})
	if started {
		fmt.Fprintln(w, ".RE")
	}
}

// roff escapes text for a roff line: backslashes, leading dots and quotes, hyphens as minus signs.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}

// quoted is one macro argument: roff-escaped, in double quotes (which roff writes as \(dq inside).
func quoted(s string) string {
	return `"` + strings.ReplaceAll(roff(s), `"`, `\(dq`) + `"`
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
