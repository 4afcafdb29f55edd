package formats

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
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
		{`"/bin/x 'a'b'"`, []string{"/bin/x", "ab"}, nil}, // a quote opened as the line ends is passed over
		{`"/bin/x 'a\n"`, []string{"/bin/x", "a\n"}, nil},
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
	octalEscape := regexp.MustCompile(`\\[0-7]{3}`)
	for _, argv := range [][]string{
		{"/bin/x"}, {"/bin/x", "%h"}, {"a b", ""}, {"/bin/x", "#!{}", "\n\r\f\v\x7f\x01", "ü"}, {"/bin/x", "\n1", "\x01f"},
		{"/bin/sh", "-c", "echo hi there"},
	} {
		text, ok := kaCommand(argv)
		if !ok || strings.ContainsAny(text, "\n{}#!") || strings.Contains(octalEscape.ReplaceAllString(text, ""), `\`) || strings.Count(text, `"`) > 2 {
			t.Errorf("%q written as %s (%v): a line keepalived reads whole must hold no newline, brace, comment, inner double quote or backslash but an octal escape", argv, text, ok)
		}
		readsBack(t, argv, text)
	}
	// A quote or a backslash is read one way before keepalived 2.3.2 and
	// another since: not written.
	for _, argv := range [][]string{{`\`}, {"/bin/x", "it's"}, {"/bin/x", `"q"`}, {"/bin/sh", "-c", "echo 'hi there' \\"}} {
		if text, ok := kaCommand(argv); ok {
			t.Errorf("%q written as %s", argv, text)
		}
	}
}

// TestKeepalivedScriptLineAcrossVersions: keepalived reads quorum_up and
// quorum_down with set_script_params_array, as misc_path: the import reads
// both as keepalived 2.3.2 and later do (`\\t` a backslash and a t, `\x41`
// an A, `\'` a quote inside single quotes) and warns, by line, where
// earlier ones (Debian's 2.2.7) read the line otherwise. It read quorum
// programs with a shell's rules ("atb"), and the export wrote them for
// those ("it's" as 'it'\”s', which keepalived 2.3.2 reads as an
// unterminated quote): now one writer writes both keywords, only in forms
// both read alike, and refuses a quote or a backslash by field.
func TestKeepalivedScriptLineAcrossVersions(t *testing.T) {
	for _, c := range []struct {
		line string
		argv []string
		warn string // "" when both read it alike
	}{
		{`"/bin/printf a\\tb"`, []string{"/bin/printf", `a\tb`}, `quorum_up: keepalived 2.3.2 and later read ["/bin/printf" "a\\tb"] (as ipvsctl does), earlier ones such as Debian's 2.2.7 read ["/bin/printf" "a\tb"]`},
		{`"/bin/echo \x41 'it\'s'"`, []string{"/bin/echo", "A", "it's"}, `earlier ones such as Debian's 2.2.7 read ["/bin/echo" "A" "its"]`},
		{`"/bin/echo 'it\\''s'"`, []string{"/bin/echo", `it\s`}, `(as ipvsctl does), earlier ones such as Debian's 2.2.7 read ["/bin/echo" "it's"]`},
		{`"/bin/echo '\x0a1'"`, []string{"/bin/echo", "\n1"}, `earlier ones such as Debian's 2.2.7 read ["/bin/echo" "\xa1"]`},
		{`/usr/local/sbin/quorum-up.sh`, []string{"/usr/local/sbin/quorum-up.sh"}, ""},
		{`"/bin/n up 'web 1' \041"`, []string{"/bin/n", "up", "web 1", "!"}, ""},
	} {
		conf := "virtual_server 198.18.0.100 80 {\n quorum_up " + c.line + "\n protocol TCP\n lb_algo rr\n lb_kind NAT\n real_server 198.18.0.11 80 {\n }\n}\n"
		st, rep, err := ImportWith(FormatKeepalived, strings.NewReader(conf), Options{})
		if err != nil {
			t.Errorf("quorum_up %s: %v", c.line, err)
			continue
		}
		if d := cmp.Diff(c.argv, []string(st.Services[0].QuorumUp)); d != "" {
			t.Errorf("quorum_up %s (-keepalived's +imported):\n%s", c.line, d)
		}
		var warned []string
		for _, n := range rep.Warnings {
			warned = append(warned, n.String())
		}
		if got := strings.Join(warned, "\n"); (c.warn == "" && got != "") || (c.warn != "" && (!strings.HasPrefix(got, "line 2: ") || !strings.Contains(got, c.warn))) {
			t.Errorf("quorum_up %s: warnings %q, want %q", c.line, got, c.warn)
		}
	}
	for _, argv := range [][]string{{"/bin/n", "up", "web 1"}, {"/bin/n", "", "tab\there", "#1", "{x}"}, {"/opt/my tools/n"}, {"/bin/n", "a\nb", "\r\x01"}} {
		st := &ipvsmgr.State{Services: []ipvsmgr.Service{{Address: "198.18.0.100", Port: 80, Protocol: "tcp", Forwarding: "nat",
			QuorumDown: argv, Servers: []ipvsmgr.Server{{Address: "198.18.0.11", Port: 80}}}}}
		var out strings.Builder
		if err := Export(FormatKeepalived, st, &out); err != nil {
			t.Errorf("%q: %v", argv, err)
			continue
		}
		var rest string
		for _, l := range strings.Split(out.String(), "\n") {
			if r, ok := strings.CutPrefix(strings.TrimSpace(l), "quorum_down "); ok {
				rest = r
			}
		}
		readsBack(t, argv, rest)
	}
	for _, argv := range [][]string{{"/bin/n", "it's"}, {"/bin/n", `say "hi"`}, {"/bin/n", `a\b`}} {
		st := &ipvsmgr.State{Services: []ipvsmgr.Service{{Address: "198.18.0.100", Port: 80, Protocol: "tcp", Forwarding: "nat",
			QuorumUp: argv, Servers: []ipvsmgr.Server{{Address: "198.18.0.11", Port: 80, Check: &ipvsmgr.Check{Type: "exec", Command: argv}}}}}}
		var out strings.Builder
		err := Export(FormatKeepalived, st, &out)
		if err == nil || !strings.Contains(err.Error(), "services[0].quorum_up: ") || !strings.Contains(err.Error(), "services[0].servers[0].check.command: ") ||
			!strings.Contains(err.Error(), "a quote or a backslash in a word") {
			t.Errorf("%q: export %v\n%s", argv, err, out.String())
		}
	}
}

// readsBack checks that keepalived, before and after 2.3.2, reads the
// command line text as argv, with no words after it.
func readsBack(t *testing.T, argv []string, text string) {
	t.Helper()
	for _, read := range []func(string) ([]string, []string, error){kaScript, kaScriptLegacy} {
		back, after, err := read(text)
		if err != nil || len(after) > 0 {
			t.Errorf("%q written as %s: keepalived reads %v, then %q", argv, text, err, after)
			continue
		}
		if d := cmp.Diff(argv, back); d != "" {
			t.Errorf("%q written as %s; keepalived reads (-want +got):\n%s", argv, text, d)
		}
	}
}
