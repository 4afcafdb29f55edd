package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/formats"
)

func runExport(env *cliEnv, args []string) int {
	_, exportable := formats.Formats()
	fs, db := env.newFlagSet("export", "[--format "+strings.Join(exportable, "|")+"]",
		"Print the stored desired state in ipvsctl's JSON, ipvsadm's save format (for ipvsadm -R) or Piranha's lvs.cf.")
	format := fs.String("format", "json", "output format: "+strings.Join(exportable, ", "))
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl export: takes no arguments")
		return exitUsage
	}
	state, _, code := env.loadState("export", *db)
	if state == nil {
		return code
	}
	if err := formats.Export(*format, state, env.stdout); err != nil {
		return env.fail("export", err, strings.Contains(err.Error(), "unknown format"))
	}
	return exitOK
}

func runImport(env *cliEnv, args []string) int {
	importable, _ := formats.Formats()
	fs, db := env.newFlagSet("import", "--format "+strings.Join(importable, "|")+" FILE [--no-apply] [--no-wait] [--json]",
		"Replace the desired state with FILE (- for stdin) read in another tool's format, store it as a new\n"+
			"revision, then reconcile the kernel. Malformed input is an error naming the line; nothing stored changes.\n"+
			"Settings with no equivalent in ipvsctl are kept in the state's \"imported\" list and reported.")
	format := fs.String("format", "", "input format: "+strings.Join(importable, ", "))
	var o writeOpts
	o.register(fs)
	pos, st, ok := env.parseInterspersed(fs, args)
	if !ok {
		return st
	}
	if len(pos) != 1 || *format == "" {
		fmt.Fprintln(env.stderr, "ipvsctl import: want --format FORMAT and exactly one FILE")
		return exitUsage
	}
	f := os.Stdin
	if pos[0] != "-" {
		var err error
		if f, err = os.Open(pos[0]); err != nil {
			return env.fail("import", fmt.Errorf("open %s: %w", pos[0], err), false)
		}
		defer f.Close()
	}
	doc, err := formats.Import(*format, f)
	if err != nil {
		var pe *formats.ParseError
		return env.fail("import", err, errors.As(err, &pe) || isInvalid(err) || strings.Contains(err.Error(), "unknown format"))
	}
	for _, k := range doc.Imported {
		fmt.Fprintf(env.stderr, "kept, no equivalent yet: %s line %d: %s %s = %q\n", k.Source, k.Line, k.Scope, k.Key, k.Value)
	}
	desired, err := ipvsmgr.Compile(doc)
	if err != nil {
		return env.fail("import", err, true)
	}
	return env.replaceAndReconcile("import", fmt.Sprintf("import --format %s %s", *format, pos[0]), o, doc, desired, env.openKernel, env.readStored(context.Background(), *db))
}
