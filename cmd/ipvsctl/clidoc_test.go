package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
)

// TestCLIReference: docs/cli.md is what the command table makes of it, byte
// for byte (regenerate with go generate ./cmd/ipvsctl, which runs this test
// with -update), and, read on its own, it has a section for every visible
// verb and sub-verb with each of its flags, and none for a verb the table lacks.
func TestCLIReference(t *testing.T) {
	cmds := commands()
	var b bytes.Buffer
	writeCLIReference(&b, cmds)
	if *update {
		if err := os.WriteFile(cliDocPath, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file, err := os.ReadFile(cliDocPath)
	if err != nil {
		t.Fatalf("%v (make it with go generate ./cmd/ipvsctl)", err)
	}
	sections := cliSections(string(file))
	want := map[string]bool{}
	for _, d := range allDocs(cmds) {
		want[d.Path] = true
		body, ok := sections[d.Path]
		if !ok {
			t.Errorf("docs/cli.md has no section for %q", "ipvsctl "+d.Path)
			continue
		}
		if !strings.Contains(body, "    ipvsctl "+strings.TrimSpace(d.Path+" "+d.Synopsis)+"\n") {
			t.Errorf("docs/cli.md's %q does not show its synopsis %q", d.Path, d.Synopsis)
		}
		d.Flags.VisitAll(func(f *flag.Flag) {
			if !isGlobalFlag(f.Name) && !strings.Contains(body, "| `"+dashed(f.Name)) {
				t.Errorf("docs/cli.md's %q does not list its flag %s", d.Path, dashed(f.Name))
			}
		})
	}
	for path := range sections {
		if !want[path] {
			t.Errorf("docs/cli.md has a section for %q, which the command table does not have", path)
		}
	}
	if !bytes.Equal(file, b.Bytes()) {
		t.Errorf("docs/cli.md differs from what the command table makes: run go generate ./cmd/ipvsctl")
	}
}

// cliSections splits the reference by verb and sub-verb: "vs add" is the text
// under "### vs add", "apply" the text under "## apply" (a verb with sub-verbs
// has its own "## vs" section too, holding only its summary).
func cliSections(doc string) map[string]string {
	sections := map[string]string{}
	cur, verb, withSubs := "", "", map[string]bool{}
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			verb = strings.TrimPrefix(line, "## ")
			cur = verb
			sections[cur] = ""
		case strings.HasPrefix(line, "### "):
			cur = strings.TrimPrefix(line, "### ")
			withSubs[verb] = true
			sections[cur] = ""
		case cur != "":
			sections[cur] += line + "\n"
		}
	}
	for v := range withSubs {
		delete(sections, v)
	}
	return sections
}
