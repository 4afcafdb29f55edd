package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
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
	getenv         func(string) string
	// kernel, when set, replaces the real IPVS driver (tests); VIPs and fwmark
	// rules are then left alone.
	kernel ipvsmgr.Kernel
}

func (e *cliEnv) logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
}

// newFlagSet returns a flag set for one verb that prints its usage on --help and
// carries the global --db flag.
func (e *cliEnv) newFlagSet(name, args, summary string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	def := defaultDB
	if v := e.getenv("IPVSCTL_DB"); v != "" {
		def = v
	}
	db := fs.String("db", def, "path of the state database (env IPVSCTL_DB)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ipvsctl %s %s\n\n%s\n\nflags:\n", name, args, summary)
		fs.PrintDefaults()
	}
	return fs, db
}

// parseFlags parses args and maps the outcome to an exit status; ok is false when
// the verb should return status at once (help shown or bad usage).
func (e *cliEnv) parseFlags(fs *flag.FlagSet, args []string) (status int, ok bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(e.stdout)
		fs.Usage()
		return exitOK, false
	case err != nil:
		return exitUsage, false
	}
	return exitOK, true
}

// fail prints err and returns the exit status its kind calls for.
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
	if invalid {
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
		if (args[0] == "--db" || args[0] == "-db") && len(args) > 1 {
			n = 2
		}
		global, args = append(global, args[:n]...), args[n:]
	}
	if len(args) == 0 {
		return nil
	}
	return append(append([]string{args[0]}, global...), args[1:]...)
}
