package formats

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestKeepalivedMiscPath: misc_path is read as keepalived's
// misc_path_handler reads it (the first word, split again with quotes and
// escapes), and what kaCommand writes reads back to the same argv
// (FuzzImportKeepalived seed e5d01ef0f51db447: `misc_path "\\"` is the
// program `\`; it was written as a shell-quoted '\' that keepalived reads
// as an unterminated quote, and the importer as ”).
func TestKeepalivedMiscPath(t *testing.T) {
	for _, c := range []struct {
		rest          string
		argv, ignored []string
	}{
		{`/usr/local/bin/script.sh`, []string{"/usr/local/bin/script.sh"}, nil},
		{`"/usr/local/bin/script.sh arg1 arg2"`, []string{"/usr/local/bin/script.sh", "arg1", "arg2"}, nil},
		{`/bin/check arg -w`, []string{"/bin/check"}, []string{"arg", "-w"}},
		{`"\\"`, []string{`\`}, nil},
		{`"'a b' c\tx"`, []string{"a b", "c\tx"}, nil},
		{`"'it\'s' \x41\101\cA"`, []string{"it's", "AA\x01"}, nil},
		{`"/bin/x ''"`, []string{"/bin/x", ""}, nil},
	} {
		argv, ignored, err := kaScript(c.rest)
		if err != nil {
			t.Errorf("%s: %v", c.rest, err)
			continue
		}
		if d := cmp.Diff(c.argv, argv); d != "" {
			t.Errorf("%s: argv (-want +got):\n%s", c.rest, d)
		}
		if d := cmp.Diff(c.ignored, ignored, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s: ignored (-want +got):\n%s", c.rest, d)
		}
	}
	for _, bad := range []string{`"'a"`, `"x\"`, `""`, `"'' x"`} {
		if argv, _, err := kaScript(bad); err == nil {
			t.Errorf("%s: read as %q, want an error", bad, argv)
		}
	}
	for _, argv := range [][]string{
		{"/bin/x"}, {"/bin/x", "%h"}, {`\`}, {"a b", ""}, {"it's", `"q"`, "#!{}", "\n\r\f\v\x7f\x01", "ü"}, {"/bin/sh", "-c", "echo 'hi there' \\"},
	} {
		text := kaCommand(argv)
		if strings.ContainsAny(text, "\n{}#!") || strings.Count(text, `"`) > 2 {
			t.Errorf("%q written as %s: a line keepalived reads whole must hold no newline, brace, comment or inner double quote", argv, text)
		}
		back, ignored, err := kaScript(text)
		if err != nil || len(ignored) > 0 {
			t.Errorf("%q written as %s: %v, ignored %q", argv, text, err, ignored)
			continue
		}
		if d := cmp.Diff(argv, back); d != "" {
			t.Errorf("%q written as %s reads back (-want +got):\n%s", argv, text, d)
		}
	}
}
