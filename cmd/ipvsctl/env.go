package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/ipvsctl/ipvsctl/internal/regularfile"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const defaultDB = "/var/lib/ipvsctl/ipvsctl.db"

// cliEnv is what a verb may touch of the process, so tests run verbs in-process.
type cliEnv struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	getenv         func(string) string
	// kernel, when set, replaces the real IPVS driver (tests); host, when
	// set with it, stands for the VIPs, fwmark rules and sysctls, which are
	// otherwise left alone.
	kernel ipvsmgr.Kernel
	host   hostFake
	// probe, when set, makes the verb describe itself instead of running:
	// its flag set is recorded here and parsing stops (see probeVerb).
	probe *verbDoc
	// terminal, when set, says whether stderr is a terminal (tests);
	// otherwise it is asked of the file.
	terminal func() bool
	// progressShown: a progress line is on the terminal, to be cleared.
	progressShown bool
	// cmd is the verb being run (its examples, where it runs).
	cmd *command
	// hostRoot, when set, is where `tune` reads and writes /proc, /sys and
	// /etc instead of / (tests).
	hostRoot string
}

// hostFake is what tests give for the host's modules, sysctls, VIPs and mangle rules.
type hostFake = ipvsmgr.Host

func (e *cliEnv) logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
}

// globalFlags are the flags every verb takes.
type globalFlags struct {
	db, server, token string
	caCert            string // PEM file the remote daemon's certificate must chain to (--ca-cert)
}

// newFlagSet returns a flag set for one verb that prints its usage on --help and
// carries the global flags.
func (e *cliEnv) newFlagSet(name, args, summary string) (*flag.FlagSet, *globalFlags) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	def := defaultDB
	if v := e.getenv("IPVSCTL_DB"); v != "" {
		def = v
	}
	g := &globalFlags{}
	fs.StringVar(&g.db, "db", def, "path of the state database (env IPVSCTL_DB)")
	fs.StringVar(&g.server, "server", e.getenv("IPVSCTL_SERVER"), "URL of a remote ipvsctl daemon to send the verb to (env IPVSCTL_SERVER)")
	fs.StringVar(&g.token, "token", e.getenv("IPVSCTL_TOKEN"), "API token for --server (env IPVSCTL_TOKEN; --token-file keeps it out of the process list)")
	fs.Func("token-file", "a file holding the API token for --server (mode 0600, read once, its line end dropped): unlike --token, not shown to every local user in /proc/PID/cmdline", func(path string) error {
		tok, err := regularfile.ReadSecret(path)
		g.token = tok
		return err
	})
	fs.StringVar(&g.caCert, "ca-cert", e.getenv("IPVSCTL_CA_CERT"), "PEM certificate(s) an https --server must show or chain to, instead of the system's roots: the daemon's self-signed certificate, or its CA (env IPVSCTL_CA_CERT)")
	example := e.cmd.example(name)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ipvsctl %s %s\n\n%s\n", name, args, summary)
		if example != "" {
			fmt.Fprintf(fs.Output(), "\nexample: ipvsctl %s\n", example)
		}
		fmt.Fprintf(fs.Output(), "\nflags:\n")
		fs.PrintDefaults()
	}
	if e.probe != nil {
		*e.probe = verbDoc{Path: name, Synopsis: args, Summary: summary, Example: example, Flags: fs}
	}
	return fs, g
}

// parseFlags parses args and maps the outcome to an exit status; ok is false when
// the verb should return status at once (help shown or bad usage).
func (e *cliEnv) parseFlags(fs *flag.FlagSet, args []string) (status int, ok bool) {
	if e.probe != nil {
		return exitOK, false
	}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(e.stdout)
		fs.Usage()
		return exitOK, false
	case err != nil:
		return exitUsage, false
	}
	if f := fs.Lookup("server"); f != nil && f.Value.String() != "" {
		if where := e.cmd.runsOn(fs.Name()); where == onDirector || where == onRealServer || where == overSSH {
			fmt.Fprintf(e.stderr, "ipvsctl %s: %s, not through a daemon's API: run it there without --server and IPVSCTL_SERVER\n",
				fs.Name(), map[runsOn]string{onDirector: "runs on the director itself (its own database and kernel)",
					onRealServer: "runs on the real server being prepared",
					overSSH:      "runs on the machine that logs in to the real servers over SSH"}[where])
			return exitUsage, false
		}
	}
	return exitOK, true
}

// sub is the sub-verb of a flag set's name ("vs add" -> "add"; "" for a verb without).
func sub(name string) string {
	_, s, _ := strings.Cut(name, " ")
	return s
}

// runsOn is where the verb (or sub-verb) of the flag set named name runs.
func (c *command) runsOn(name string) runsOn {
	if c == nil {
		return viaCore
	}
	return c.where[sub(name)]
}

// example is the example command line of the flag set named name ("" for none).
func (c *command) example(name string) string {
	if c == nil {
		return ""
	}
	return c.examples[sub(name)]
}

// fail prints err and returns the exit status its kind calls for: 2 for an
// error in what was asked (invalid, not found, exists) or when invalid is
// set, 1 for a failure.
func (e *cliEnv) fail(verb string, err error, invalid bool) int {
	var ve *ipvsmgr.ValidationError
	if errors.As(err, &ve) {
		fmt.Fprintf(e.stderr, "ipvsctl %s: invalid desired state:\n", verb)
		for _, p := range ve.Problems {
			fmt.Fprintf(e.stderr, "  %s\n", p)
		}
		return exitUsage
	}
	fmt.Fprintf(e.stderr, "ipvsctl %s: %v\n", verb, err)
	if invalid || server.IsUserError(err) {
		return exitUsage
	}
	return exitFail
}

// moveGlobalFlags puts the global flags that the dispatcher passes before a
// sub-verb (ipvsctl --db PATH vs add ...) after it, with the sub-verb's own.
func moveGlobalFlags(args []string) []string {
	var global []string
	for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' && args[0] != "-h" && args[0] != "--help" {
		n := 1
		if takesValue(args[0]) && len(args) > 1 {
			n = 2
		}
		global, args = append(global, args[:n]...), args[n:]
	}
	if len(args) == 0 {
		return nil
	}
	return append(append([]string{args[0]}, global...), args[1:]...)
}

// subVerb takes a verb's sub-verb (vs add, draft list...) off its arguments,
// the global flags moved past it. ok is false when there is nothing more to
// do than return code: no sub-verb (usage on stderr, exit 2), or -h, --help
// or help (usage on stdout, exit 0).
func (e *cliEnv) subVerb(usage string, args []string) (verb string, rest []string, code int, ok bool) {
	args = moveGlobalFlags(args)
	usage = strings.TrimSuffix(usage, "\n")
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, usage)
		return "", nil, exitUsage, false
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprintln(e.stdout, usage)
		return "", nil, exitOK, false
	}
	return args[0], args[1:], 0, true
}

// unknownSubVerb refuses a sub-verb verb does not have, naming those it has
// (the command table's), exit 2.
func (e *cliEnv) unknownSubVerb(name, verb string) int {
	subs := commands()[name].subs
	want := strings.Join(subs, ", ")
	if n := len(subs); n > 1 {
		want = strings.Join(subs[:n-1], ", ") + " or " + subs[n-1]
	}
	fmt.Fprintf(e.stderr, "ipvsctl %s: unknown verb %q (want %s)\n", name, verb, want)
	return exitUsage
}

// takesValue reports whether a global flag given as its own argument takes the next one.
func takesValue(arg string) bool {
	switch arg {
	case "--db", "-db", "--server", "-server", "--token", "-token", "--ca-cert", "-ca-cert":
		return true
	}
	return false
}
