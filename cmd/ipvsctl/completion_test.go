package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/fakekernel"
)

// TestCommandTableMatchesDispatchers: each sub-verb in the table is one its
// verb dispatches (it builds the flag set "VERB SUB"), and each verb names
// the same sub-verbs when given one it does not know.
func TestCommandTableMatchesDispatchers(t *testing.T) {
	wantList := regexp.MustCompile(`\(want ([a-z, ]+)\)`)
	for name, cmd := range commands() {
		if len(cmd.subs) == 0 || name == "completion" {
			continue
		}
		for _, sub := range cmd.subs {
			if d := probeVerb(cmd, sub); d == nil || d.Path != name+" "+sub {
				t.Errorf("%s %s: the dispatcher does not build its flag set (%+v)", name, sub, d)
			}
		}
		if r := runCLI(t, nil, name); r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: ipvsctl "+name) {
			t.Errorf("%s without a sub-verb: exit %d, stderr %q", name, r.code, r.stderr)
		}
		if r := runCLI(t, nil, name, "--help"); r.code != exitOK || !strings.HasPrefix(r.stdout, "usage: ipvsctl "+name) {
			t.Errorf("%s --help: exit %d, stdout %q", name, r.code, r.stdout)
		}
		r := runCLI(t, nil, name, "no-such-verb")
		m := wantList.FindStringSubmatch(r.stderr)
		if m == nil {
			t.Errorf("%s no-such-verb: no list of sub-verbs in %q", name, r.stderr)
			continue
		}
		listed := strings.FieldsFunc(m[1], func(r rune) bool { return r == ',' || r == ' ' || r == '|' })
		listed = slices.DeleteFunc(listed, func(s string) bool { return s == "or" })
		if !sameSet(listed, cmd.subs) {
			t.Errorf("%s: the dispatcher knows %v, the command table %v", name, listed, cmd.subs)
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestHelpIsTheFlagHelp: help VERB [SUB] prints what VERB [SUB] --help does,
// for every verb and sub-verb, and each has a synopsis line and a description.
func TestHelpIsTheFlagHelp(t *testing.T) {
	for _, d := range allDocs(commands()) {
		args := strings.Fields(d.Path)
		help := runCLI(t, nil, append([]string{"help"}, args...)...)
		flagHelp := runCLI(t, nil, append(args, "--help")...)
		if help.code != 0 || help.stdout != flagHelp.stdout || !strings.HasPrefix(help.stdout, "usage: ipvsctl "+d.Path) {
			t.Errorf("help %s (exit %d):\n%s\n%s --help:\n%s", d.Path, help.code, help.stdout, d.Path, flagHelp.stdout)
		}
		if d.Summary == "" {
			t.Errorf("%s has no description", d.Path)
		}
	}
	if r := runCLI(t, nil, "help"); r.code != 0 || !strings.Contains(r.stdout, "  vs         virtual services in the desired state: add|set|rm|list|enable|disable\n") ||
		strings.Contains(r.stdout, "__complete") {
		t.Errorf("help: exit %d\n%s", r.code, r.stdout)
	}
	if r := runCLI(t, nil, "help", "vs", "nope"); r.code != 2 {
		t.Errorf("help vs nope: exit %d", r.code)
	}
}

// TestManPage: every verb and sub-verb is in ipvsctl(8) with each of its own
// flags, and groff (when installed) reads it without a warning.
func TestManPage(t *testing.T) {
	r := runCLI(t, nil, "man")
	if r.code != 0 || !strings.HasPrefix(r.stdout, ".TH IPVSCTL 8 ") {
		t.Fatalf("man: exit %d\n%s", r.code, r.stderr)
	}
	for _, d := range allDocs(commands()) {
		if !strings.Contains(r.stdout, quoted("ipvsctl "+d.Path+" "+d.Synopsis)) {
			t.Errorf("the man page lacks %s", d.Path)
		}
		for _, f := range d.flagNames() {
			if f != "--help" && !isGlobalFlag(strings.TrimLeft(f, "-")) && !strings.Contains(r.stdout, ".B "+roff(f)) {
				t.Errorf("the man page lacks %s's flag %s", d.Path, f)
			}
		}
	}
	if _, err := exec.LookPath("groff"); err == nil {
		cmd := exec.Command("groff", "-man", "-ww", "-z")
		cmd.Stdin = strings.NewReader(r.stdout)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("groff -man -ww: %v\n%s", err, out)
		}
	}
}

func TestCompleteWords(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ipvsctl.db")
	if r := runCLI(t, fakekernel.New(), "--db", db, "apply", "-f", labState); r.code != 0 {
		t.Fatalf("apply: %s", r.stderr)
	}
	getenv := func(k string) string { return map[string]string{"IPVSCTL_DB": db}[k] }
	for _, c := range []struct {
		line string // the last word is the one completed ("|" marks an empty one)
		kind string
		want []string
	}{
		{"r", "words", []string{"realserver", "restore", "rollback", "rs"}},
		{"vs |", "words", []string{"add", "set", "rm", "list", "enable", "disable"}},
		{"vs set |", "words", []string{"web", "web-nat"}},
		{"vs set web |", "words", nil},
		{"rs drain web-n", "words", []string{"web-nat"}},
		{"rs drain web |", "words", []string{"rs1", "rs2", "rs3"}},
		{"rs set --weight 3 web-nat n", "words", []string{"nat1", "nat2"}},
		{"--db " + db + " rs list |", "words", []string{"web", "web-nat"}},
		{"rs add web --we", "words", []string{"--weight"}},
		{"apply -", "words", []string{"--base", "-f", "--json", "--no-apply", "--no-wait", "-v", "--ca-cert", "--db", "--server", "--token", "--token-file", "--help"}},
		{"apply -f |", "files", nil},
		{"import --format json |", "files", nil},
		{"import --format l", "words", []string{"ldirectord", "lvs.cf"}},
		{"export --format k", "words", []string{"keepalived"}},
		{"--db |", "files", nil},
		{"node set --peer-ca |", "files", nil},
		{"settings set --maintenance-dir |", "files", nil},
		{"node set --replication f", "words", []string{"follower"}},
		{"node set --replication |", "words", []string{"pair", "source", "follower"}},
		{"--s", "words", []string{"--server"}},
		{"help rs d", "words", []string{"drain", "disable"}},
		{"completion |", "words", []string{"bash", "zsh", "fish"}},
		{"__complete |", "words", nil},
		{"version -", "words", []string{"--json", "--ca-cert", "--db", "--server", "--token", "--token-file", "--help"}},
	} {
		words := strings.Fields(strings.ReplaceAll(c.line, "|", "\x00"))
		for i := range words {
			words[i] = strings.ReplaceAll(words[i], "\x00", "")
		}
		kind, got := completeWords(words, getenv)
		if kind != c.kind || !slices.Equal(got, c.want) {
			t.Errorf("%q: %s %q, want %s %q", c.line, kind, got, c.kind, c.want)
		}
	}
	// The names the scripts may also ask for directly; no database, no names (and none made).
	var out bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &out, getenv: getenv}
	if dispatch(env, []string{"__complete", "servers", "web"}); out.String() != "rs1\nrs2\nrs3\n" {
		t.Errorf("__complete servers web: %q", out.String())
	}
	missing := filepath.Join(t.TempDir(), "none.db")
	if got := storedNames(missing, ""); got != nil {
		t.Errorf("names from a missing database: %v", got)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("completion made %s", missing)
	}
}

// TestCompletionScripts: each script is valid for its shell (where the shell
// is installed), and bash's, run against a stand-in ipvsctl, fills COMPREPLY
// with the words (or asks for file names) as the answer says.
func TestCompletionScripts(t *testing.T) {
	for _, shell := range commands()["completion"].subs {
		r := runCLI(t, nil, "completion", shell)
		if r.code != 0 || r.stdout != completionScripts[shell] || r.stdout == "" {
			t.Fatalf("completion %s: exit %d %s", shell, r.code, r.stderr)
		}
		if _, err := exec.LookPath(shell); err != nil {
			t.Logf("%s is not installed: its script is not checked", shell)
			continue
		}
		check := map[string][]string{"bash": {"-n"}, "zsh": {"-n"}, "fish": {"--no-execute"}}[shell]
		script := filepath.Join(t.TempDir(), "completion."+shell)
		os.WriteFile(script, []byte(r.stdout), 0o600)
		if out, err := exec.Command(shell, append(check, script)...).CombinedOutput(); err != nil {
			t.Errorf("%s %v on the completion script: %v\n%s", shell, check, err, out)
		}
	}
	if _, err := exec.LookPath("bash"); err != nil {
		return
	}
	dir := t.TempDir()
	stub := filepath.Join(dir, "ipvsctl")
	os.WriteFile(stub, []byte("#!/bin/sh\n[ \"$1 $2 $3 $4\" = \"__complete words -- rs\" ] && printf 'words\\nadd\\nset\\n' && exit 0\n"+
		"[ \"$4\" = apply ] && printf 'files\\n' && exit 0\nexit 1\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "afile.json"), nil, 0o600)
	test := completionScripts["bash"] + `
COMP_WORDS=(` + stub + ` rs ""); COMP_CWORD=2; _ipvsctl; echo "rs: ${COMPREPLY[*]}"
COMPREPLY=(); COMP_WORDS=(` + stub + ` apply -f ` + dir + `/af); COMP_CWORD=3; _ipvsctl; echo "apply: ${COMPREPLY[*]}"
`
	out, err := exec.Command("bash", "-c", test).CombinedOutput()
	want := "rs: add set\napply: " + dir + "/afile.json\n"
	if err != nil || string(out) != want {
		t.Errorf("bash completion: %v\n%s\nwant:\n%s", err, out, want)
	}
}

// TestSubVerbsListedOnce: usage and the man page print a verb's sub-verbs
// once, after its summary; a summary that named them too printed the list
// twice ("...: list, show, diff, ...: list|show|diff|...").
func TestSubVerbsListedOnce(t *testing.T) {
	help := runCLI(t, nil, "help")
	man := runCLI(t, nil, "man")
	if help.code != 0 || man.code != 0 {
		t.Fatalf("help: exit %d, man: exit %d", help.code, man.code)
	}
	manLines := strings.Split(man.stdout, "\n")
	for _, name := range visibleVerbs(commands()) {
		cmd := commands()[name]
		if len(cmd.subs) == 0 {
			continue
		}
		var helpLine, manText string
		for _, l := range strings.Split(help.stdout, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == name {
				helpLine = l
			}
		}
		for i, l := range manLines {
			if strings.HasPrefix(l, ".SS "+quoted("ipvsctl "+name+" "+strings.Join(cmd.subs, "|"))) && i+1 < len(manLines) {
				manText = l + "\n" + manLines[i+1]
			}
		}
		if helpLine == "" || manText == "" {
			t.Errorf("%s: no line in help (%q) or no section in the man page (%q)", name, helpLine, manText)
			continue
		}
		for _, sub := range cmd.subs {
			word := regexp.MustCompile(`\b` + regexp.QuoteMeta(sub) + `\b`)
			if n := len(word.FindAllString(helpLine, -1)); n != 1 {
				t.Errorf("help names %s's sub-verb %s %d times: %q", name, sub, n, helpLine)
			}
			if n := len(word.FindAllString(manText, -1)); n != 1 {
				t.Errorf("the man page names %s's sub-verb %s %d times: %q", name, sub, n, manText)
			}
		}
	}
}
