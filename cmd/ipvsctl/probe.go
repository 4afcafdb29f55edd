package main

import (
	"flag"
	"io"
	"sort"
	"strings"
)

// verbDoc is one verb or sub-verb as its own flag set describes it: the same
// text its --help prints, for help, the man page and completion.
type verbDoc struct {
	Path     string // "apply", "vs add"
	Synopsis string
	Summary  string
	Example  string // a command line after "ipvsctl ", or ""
	Flags    *flag.FlagSet
}

// probeVerb runs the verb (with sub, if any) far enough to build its flag
// set, and returns what it recorded; nil when the verb built none (a verb
// with sub-verbs asked without one). Nothing runs: parseFlags stops there.
func probeVerb(cmd command, sub string) *verbDoc {
	doc := &verbDoc{}
	env := &cliEnv{stdout: io.Discard, stderr: io.Discard, stdin: strings.NewReader(""), probe: doc, cmd: &cmd,
		getenv: func(k string) string {
			if k == "HOME" {
				return "~"
			}
			return ""
		}}
	var args []string
	if sub != "" {
		args = []string{sub}
	}
	cmd.run(env, args)
	if doc.Flags == nil {
		return nil
	}
	return doc
}

// allDocs is every visible verb and sub-verb, in order.
func allDocs(cmds map[string]command) []*verbDoc {
	var docs []*verbDoc
	for _, name := range visibleVerbs(cmds) {
		subs := cmds[name].subs
		if len(subs) == 0 {
			subs = []string{""}
		}
		for _, sub := range subs {
			if d := probeVerb(cmds[name], sub); d != nil {
				docs = append(docs, d)
			}
		}
	}
	return docs
}

func visibleVerbs(cmds map[string]command) []string {
	var names []string
	for n, c := range cmds {
		if !c.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// flags lists the verb's flags, global ones last, as "--name".
func (d *verbDoc) flagNames() []string {
	var local, global []string
	d.Flags.VisitAll(func(f *flag.Flag) {
		if isGlobalFlag(f.Name) {
			global = append(global, dashed(f.Name))
		} else {
			local = append(local, dashed(f.Name))
		}
	})
	return append(append(local, global...), "--help")
}

func isGlobalFlag(name string) bool {
	return name == "db" || name == "server" || name == "token" || name == "token-file" || name == "ca-cert"
}

// takesValue reports whether flag name (without dashes) of this verb takes a value.
func (d *verbDoc) takesValue(name string) bool {
	f := d.Flags.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// positionals are the synopsis's positional arguments ("SERVICE", "SERVER",
// "FILE", "NAME", ...), brackets removed, in order; a flag's value is not one.
func (d *verbDoc) positionals() []string {
	var pos []string
	words := strings.Fields(d.Synopsis)
	for i := 0; i < len(words); i++ {
		w := strings.Trim(words[i], "[]")
		if strings.HasPrefix(w, "-") {
			name := strings.TrimLeft(w, "-")
			if d.takesValue(name) && !strings.HasSuffix(words[i], "]") {
				i++ // its value
			}
			continue
		}
		if w == "" || w == "|" || w == "flags" || strings.ToUpper(w) != w {
			continue
		}
		pos = append(pos, w)
	}
	return pos
}

// dashed is how a flag is written: -f for one letter, --name for a word.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}
