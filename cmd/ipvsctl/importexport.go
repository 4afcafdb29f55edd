package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/formats"
	"github.com/ipvsctl/ipvsctl/server"
)

func runExport(env *cliEnv, args []string) int {
	_, exportable := formats.Formats()
	fs, g := env.newFlagSet("export", "[--format "+strings.Join(exportable, "|")+"]",
		"Print the stored desired state in ipvsctl's JSON, ipvsadm's save format (for ipvsadm -R), Piranha's lvs.cf,\n"+
			"keepalived.conf or ldirectord.cf.")
	format := fs.String("format", "json", "output format: "+strings.Join(exportable, ", "))
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl export: takes no arguments")
		return exitUsage
	}
	ctx := context.Background()
	b, err := env.readBackend(ctx, g)
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
	fs, g := env.newFlagSet("import", "--format "+strings.Join(importable, "|")+" FILE [--dry-run] [--allow-empty] [--ignore-unknown] [--config-id ID] [--no-apply] [--no-wait] [--json]",
		"Replace the desired state with FILE (- for stdin) read in another tool's format, store it as a new\n"+
			"revision, then reconcile the kernel. It says what it read (virtual services, real servers, settings kept),\n"+
			"with a line for each fix the format's own tool would make with a warning. Malformed input, and a keyword\n"+
			"the tool does not know, is an error naming the line; nothing stored changes. Settings with no equivalent\n"+
			"in ipvsctl are kept in the state's \"imported\" list and reported. keepalived's include is read here.")
	format := fs.String("format", "", "input format: "+strings.Join(importable, ", "))
	dryRun := fs.Bool("dry-run", false, "print what the import would change in the stored state, and change nothing")
	allowEmpty := fs.Bool("allow-empty", false, "let an import with no virtual services replace a state that has some")
	ignoreUnknown := fs.Bool("ignore-unknown", false, "go on past keywords the format's tool does not know (each is listed)")
	configID := fs.String("config-id", "", "keepalived: the configuration id (keepalived's -i) that @ID lines are read for, and ${_INSTANCE} (default: this host's name up to its first dot, as keepalived)")
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
	doc, rep, err := env.readImport(*format, pos[0], o, formats.Options{IgnoreUnknown: *ignoreUnknown, ConfigID: *configID})
	if err != nil {
		var open *os.PathError // the file itself could not be read
		return env.fail("import", err, !errors.As(err, &open))
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("import", err, false)
	}
	defer b.close()
	cur, rev, err := b.State(ctx)
	if err != nil {
		return env.fail("import", err, false)
	}
	if err := formats.CheckReplace(cur, doc, *allowEmpty); err != nil {
		return env.fail("import", err, true)
	}
	if *dryRun {
		return env.printImportPlan(cur, doc, rep, o.asJSON)
	}
	var body bytes.Buffer
	if err := doc.Encode(&body); err != nil {
		return env.fail("import", err, false)
	}
	o.base = rev // nothing may change between the check above and the write
	wo := env.options(o)
	res, err := b.Apply(ctx, b.actor, &body, fmt.Sprintf("import --format %s %s", *format, pos[0]), wo)
	if err != nil {
		return env.fail("import", err, false)
	}
	// The file's node settings (a keepalived priority) are this director's
	// own, outside the document: set with it, not into a draft.
	if n := rep.Node; n != nil && !wo.Draft {
		if _, err := b.SetNode(ctx, b.actor, server.NodePatch{Priority: &n.Priority, Role: &n.Role}); err != nil {
			return env.fail("import: the state is stored, the node settings are not", err, false)
		}
	}
	return env.report(res, o)
}

// readImport reads and parses FILE (- for stdin) and prints what was read:
// the kept settings, the warnings and the summary line.
func (env *cliEnv) readImport(format, name string, o writeOpts, opts formats.Options) (*ipvsmgr.State, *formats.Report, error) {
	f := os.Stdin
	if name != "-" {
		var err error
		if f, err = os.Open(name); err != nil {
			return nil, nil, fmt.Errorf("open %s: %w", name, err)
		}
		defer f.Close()
		opts.Path = name
	}
	opts.ReadFile, opts.Glob = os.ReadFile, filepath.Glob
	var in io.Reader = f
	if !o.asJSON && env.isTerminal() {
		in = env.servicesRead(f, format)
	}
	doc, rep, err := formats.ImportWith(format, in, opts)
	env.clearLine()
	if err != nil {
		return nil, nil, err
	}
	for _, k := range doc.Imported {
		fmt.Fprintf(env.stderr, "kept, no equivalent yet: %s line %d: %s %s = %q\n", k.Source, k.Line, k.Scope, k.Key, k.Value)
	}
	for _, n := range rep.Warnings {
		fmt.Fprintf(env.stderr, "warning: %s %s\n", format, n)
	}
	for _, n := range rep.Ignored {
		fmt.Fprintf(env.stderr, "ignored (--ignore-unknown): %s %s\n", format, n)
	}
	if n := rep.Node; n != nil {
		fmt.Fprintf(env.stderr, "node: priority %d, role %s (%s line %d): this director's own\n", n.Priority, n.Role, format, n.Line)
	}
	fmt.Fprintf(env.stderr, "read %s: %s\n", name, rep.Summary())
	return doc, rep, nil
}

// printImportPlan is --dry-run's output: what the import would change.
func (env *cliEnv) printImportPlan(cur, doc *ipvsmgr.State, rep *formats.Report, asJSON bool) int {
	changes := ipvsmgr.Changes(cur, doc)
	if asJSON {
		env.printJSON("", struct {
			Report  *formats.Report `json:"report"`
			Changes []string        `json:"changes"`
		}{rep, append([]string{}, changes...)})
		return exitOK
	}
	if len(changes) == 0 {
		fmt.Fprintln(env.stdout, "dry run: the stored state would not change")
		return exitOK
	}
	fmt.Fprintf(env.stdout, "dry run: the import would make %d changes:\n", len(changes))
	for _, c := range changes {
		fmt.Fprintf(env.stdout, "  %s\n", c)
	}
	return exitOK
}

// serviceMarks is how each format starts a virtual service, for counting
// them as a large file is read.
var serviceMarks = map[string]string{"ipvsadm": "-A ", "lvs.cf": "virtual ", "keepalived": "virtual_server ", "ldirectord": "virtual", "json": `"servers"`}

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
