package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/formats"
)

func runExport(env *cliEnv, args []string) int {
	_, exportable := formats.Formats()
	fs, g := env.newFlagSet("export", "[--format "+strings.Join(exportable, "|")+"]",
		"Print the stored desired state in ipvsctl's JSON, ipvsadm's save format (for ipvsadm -R) or Piranha's lvs.cf.")
	format := fs.String("format", "json", "output format: "+strings.Join(exportable, ", "))
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl export: takes no arguments")
		return exitUsage
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("export", err, false)
	}
	defer b.close()
	if err := b.Export(ctx, *format, env.stdout); err != nil {
		return env.fail("export", err, false)
	}
	return exitOK
}

func runImport(env *cliEnv, args []string) int {
	importable, _ := formats.Formats()
	fs, g := env.newFlagSet("import", "--format "+strings.Join(importable, "|")+" FILE [--no-apply] [--no-wait] [--json]",
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
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("import", err, false)
	}
	defer b.close()
	res, err := b.Import(ctx, b.actor, *format, pos[0], f, env.options(o))
	if err != nil {
		return env.fail("import", err, false)
	}
	for _, k := range res.Imported {
		fmt.Fprintf(env.stderr, "kept, no equivalent yet: %s line %d: %s %s = %q\n", k.Source, k.Line, k.Scope, k.Key, k.Value)
	}
	return env.report(res.WriteResult, o)
}
