package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

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
	var in io.Reader = f
	if !o.asJSON && env.isTerminal() {
		in = env.servicesRead(f, *format)
	}
	res, err := b.Import(ctx, b.actor, *format, pos[0], in, env.options(o))
	env.clearLine()
	if err != nil {
		return env.fail("import", err, false)
	}
	for _, k := range res.Imported {
		fmt.Fprintf(env.stderr, "kept, no equivalent yet: %s line %d: %s %s = %q\n", k.Source, k.Line, k.Scope, k.Key, k.Value)
	}
	return env.report(res.WriteResult, o)
}

// serviceMarks is how each format starts a virtual service, for counting
// them as a large file is read.
var serviceMarks = map[string]string{"ipvsadm": "-A ", "lvs.cf": "virtual ", "keepalived": "virtual_server ", "json": `"servers"`}

// servicesRead counts the services of r as it is read, on one terminal line.
func (env *cliEnv) servicesRead(r io.Reader, format string) io.Reader {
	mark := serviceMarks[format]
	if mark == "" {
		return r
	}
	return &serviceCounter{r: r, mark: []byte(mark), show: func(n int) {
		fmt.Fprintf(env.stderr, "\r\033[Kimport: %d services read", n)
		env.progressShown = true
	}}
}

type serviceCounter struct {
	r     io.Reader
	mark  []byte
	tail  []byte // the end of the last read, for a mark split across reads
	n     int
	shown time.Time
	show  func(int)
}

func (c *serviceCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	buf := append(c.tail, p[:n]...)
	c.n += bytes.Count(buf, c.mark) - bytes.Count(c.tail, c.mark)
	c.tail = append(c.tail[:0], buf[max(0, len(buf)-len(c.mark)+1):]...)
	if now := time.Now(); now.Sub(c.shown) > 100*time.Millisecond || err == io.EOF {
		c.shown = now
		c.show(c.n)
	}
	return n, err
}
