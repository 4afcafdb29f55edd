package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/formats"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// The shell scripts are thin: each asks `ipvsctl __complete words -- WORDS...`
// what may come next, and the answer is worked out here from the command
// table and the verbs' flag sets, so a new verb, sub-verb or flag completes
// with nothing else to change, even with a script installed by an older
// version. The first line of the answer is "words" (the candidates follow,
// one a line) or "files" (let the shell complete a path).
var completionScripts = map[string]string{
	"bash": `# bash completion for ipvsctl (ipvsctl completion bash)
_ipvsctl() {
	local cur=${COMP_WORDS[COMP_CWORD]} out
	out=$("${COMP_WORDS[0]}" __complete words -- "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null) || return 0
	case ${out%%$'\n'*} in
	files) mapfile -t COMPREPLY < <(compgen -f -- "$cur"); compopt -o filenames 2>/dev/null ;;
	words) [[ $out == *$'\n'* ]] && mapfile -t COMPREPLY <<<"${out#*$'\n'}" ;;
	esac
	return 0
}
complete -F _ipvsctl ipvsctl
`,
	"zsh": `#compdef ipvsctl
# zsh completion for ipvsctl (ipvsctl completion zsh)
_ipvsctl() {
	local -a out
	out=("${(@f)$(${words[1]} __complete words -- "${(@)words[2,CURRENT]}" 2>/dev/null)}")
	case ${out[1]} in
	files) _files ;;
	words) shift out; (( ${#out} )) && compadd -Q -- "${out[@]}" ;;
	esac
}
if [ "$funcstack[1]" = _ipvsctl ]; then
	_ipvsctl "$@"
else
	compdef _ipvsctl ipvsctl
fi
`,
	"fish": `# fish completion for ipvsctl (ipvsctl completion fish)
function __ipvsctl_complete
	set -l words (commandline -opc) (commandline -ct)
	set -l out (command $words[1] __complete words -- $words[2..-1] 2>/dev/null)
	if test "$out[1]" = files
		__fish_complete_path (commandline -ct)
	else if test "$out[1]" = words
		printf '%s\n' $out[2..-1]
	end
end
complete -c ipvsctl -f -a '(__ipvsctl_complete)'
`,
}

func runCompletion(env *cliEnv, args []string) int {
	args = moveGlobalFlags(args)
	shells := commands()["completion"].subs
	if len(args) == 0 || !slices.Contains(shells, args[0]) && args[0] != "-h" && args[0] != "--help" {
		fmt.Fprintf(env.stderr, "usage: ipvsctl completion %s\n", strings.Join(shells, "|"))
		return exitUsage
	}
	if args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(env.stdout, "usage: ipvsctl completion %s\n\nPrint the shell completion script. For example:\n"+
			"  ipvsctl completion bash >/etc/bash_completion.d/ipvsctl\n"+
			"  ipvsctl completion zsh >/usr/local/share/zsh/site-functions/_ipvsctl\n"+
			"  ipvsctl completion fish >~/.config/fish/completions/ipvsctl.fish\n", strings.Join(shells, "|"))
		return exitOK
	}
	shell := args[0]
	fs, _ := env.newFlagSet("completion "+shell, "",
		"Print the "+shell+" completion script: verbs, sub-verbs, flags, and the names of services and real\n"+
			"servers from the local state database.")
	if st, ok := env.parseFlags(fs, args[1:]); !ok {
		return st
	}
	fmt.Fprint(env.stdout, completionScripts[shell])
	return exitOK
}

// runComplete answers the scripts: `__complete words -- WORD...` (the last
// word is the one being completed), `__complete services`, `__complete
// servers SERVICE` (names from the local state database).
func runComplete(env *cliEnv, args []string) int {
	if len(args) == 0 {
		return exitUsage
	}
	db := env.getenv("IPVSCTL_DB")
	if db == "" {
		db = defaultDB
	}
	remote := env.getenv("IPVSCTL_SERVER") != ""
	for len(args) > 1 && takesValue(args[0]) { // global flags the dispatcher passed on
		if strings.TrimLeft(args[0], "-") == "server" {
			remote = true
		} else if strings.TrimLeft(args[0], "-") == "db" {
			db = args[1]
		}
		args = args[2:]
	}
	if remote {
		db = "" // names come from the local database only; a remote daemon's are not asked for
	}
	switch args[0] {
	case "words":
		words := args[1:]
		if len(words) > 0 && words[0] == "--" {
			words = words[1:]
		}
		kind, cands := completeWords(words, env.getenv)
		fmt.Fprintln(env.stdout, kind)
		for _, c := range cands {
			fmt.Fprintln(env.stdout, c)
		}
	case "services":
		for _, n := range storedNames(db, "") {
			fmt.Fprintln(env.stdout, n)
		}
	case "servers":
		if len(args) != 2 {
			return exitUsage
		}
		for _, n := range storedNames(db, args[1]) {
			fmt.Fprintln(env.stdout, n)
		}
	default:
		return exitUsage
	}
	return exitOK
}

// completeWords says what may replace the last of words (a command line
// after "ipvsctl"): "files", or "words" and the candidates.
func completeWords(words []string, getenv func(string) string) (string, []string) {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, done := words[len(words)-1], words[:len(words)-1]
	cmds := commands()
	i, db := completionGlobals(done, getenv)
	if i == len(done) {
		return completeVerb(cmds, done, cur)
	}
	cmd, ok := cmds[done[i]]
	if !ok || cmd.hidden {
		return "words", nil
	}
	rest := done[i+1:]
	sub := ""
	if len(cmd.subs) > 0 {
		j := slices.IndexFunc(rest, func(w string) bool { return !strings.HasPrefix(w, "-") })
		if j < 0 {
			return "words", matching(cmd.subs, cur)
		}
		sub, rest = rest[j], append(slices.Clone(rest[:j]), rest[j+1:]...)
	}
	if done[i] == "help" {
		return "words", helpCandidates(cmds, rest, cur)
	}
	d := probeVerb(cmd, sub)
	if d == nil {
		return "words", nil
	}
	return completeArgs(done[i], d, rest, cur, db)
}

// completionGlobals reads the global flags at the start of done: it
// returns the index of the verb and the database whose names complete
// ("" with a server: the names are a remote daemon's, the local database
// is not read).
func completionGlobals(done []string, getenv func(string) string) (int, string) {
	db := getenv("IPVSCTL_DB")
	if db == "" {
		db = defaultDB
	}
	i := 0
	for ; i < len(done) && strings.HasPrefix(done[i], "-"); i++ {
		if name, val, ok := strings.Cut(strings.TrimLeft(done[i], "-"), "="); isGlobalFlag(name) {
			if !ok && i+1 < len(done) {
				i++
				val = done[i]
			}
			if name == "db" {
				db = val
			}
		}
	}
	if getenv("IPVSCTL_SERVER") != "" || slices.ContainsFunc(done, func(w string) bool {
		name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
		return strings.HasPrefix(w, "-") && name == "server"
	}) {
		db = ""
	}
	return i, db
}

// completeVerb completes where the verb goes: a global flag's value, a
// global flag, or the verb.
func completeVerb(cmds map[string]command, done []string, cur string) (string, []string) {
	globals := []string{"--db", "--server", "--token", "--ca-cert", "--help"}
	if n := len(done); n > 0 && (done[n-1] == "--db" || done[n-1] == "-db") {
		return "files", nil
	}
	if n := len(done); n > 0 && isGlobalFlag(strings.TrimLeft(done[n-1], "-")) {
		return "words", nil
	}
	if strings.HasPrefix(cur, "-") {
		return "words", matching(globals, cur)
	}
	return "words", matching(visibleVerbs(cmds), cur)
}

// completeArgs completes after the verb: the value of a flag, or the
// flags, or a positional argument.
func completeArgs(verb string, d *verbDoc, rest []string, cur, db string) (string, []string) {
	var pos []string
	for j := 0; j < len(rest); j++ {
		w := rest[j]
		if !strings.HasPrefix(w, "-") || w == "-" {
			pos = append(pos, w)
			continue
		}
		name, _, hasVal := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if !hasVal && d.takesValue(name) {
			if j == len(rest)-1 {
				return flagValue(name, cur)
			}
			j++
		}
	}
	if strings.HasPrefix(cur, "-") {
		return "words", matching(d.flagNames(), cur)
	}
	want := d.positionals()
	if len(pos) >= len(want) {
		return "words", nil
	}
	switch want[len(pos)] {
	case "SERVICE":
		return "words", matching(storedNames(db, ""), cur)
	case "NAME":
		if verb == "vs" {
			return "words", matching(storedNames(db, ""), cur)
		}
	case "SERVER":
		if len(pos) > 0 {
			return "words", matching(storedNames(db, pos[len(pos)-1]), cur)
		}
	case "FILE":
		return "files", nil
	}
	return "words", nil
}

// flagValue completes a flag's value: a path for the flags that take
// files, the choices of one that takes a word.
func flagValue(name, cur string) (string, []string) {
	switch name {
	case "f", "targets", "identity", "known-hosts", "tls-cert", "tls-key", "db", "peer-ca", "maintenance-dir":
		return "files", nil
	case "format":
		importable, exportable := formats.Formats()
		return "words", matching(slices.Compact(slices.Sorted(slices.Values(append(importable, exportable...)))), cur)
	case "replication":
		return "words", matching([]string{server.ReplicationPair, server.ReplicationSource, server.ReplicationFollower}, cur)
	}
	return "words", nil
}

func helpCandidates(cmds map[string]command, rest []string, cur string) []string {
	switch len(rest) {
	case 0:
		return matching(visibleVerbs(cmds), cur)
	case 1:
		return matching(cmds[rest[0]].subs, cur)
	}
	return nil
}

func matching(cands []string, prefix string) []string {
	var out []string
	for _, c := range cands {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// storedNames reads the local state database, never creating it: the names
// of the services, or (service given) of that service's real servers, or
// nothing when it cannot be read.
func storedNames(db, service string) []string {
	if db == "" {
		return nil
	}
	if _, err := os.Stat(db); errors.Is(err, fs.ErrNotExist) || err != nil {
		return nil
	}
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		return nil
	}
	defer st.Close()
	state, _, err := server.New(server.Config{Store: st}).State(ctx)
	if err != nil || state == nil {
		return nil
	}
	var names []string
	if service == "" {
		for _, s := range state.Services {
			if s.Name != "" {
				names = append(names, s.Name)
			}
		}
		return names
	}
	i, err := server.FindService(state, service)
	if err != nil {
		return nil
	}
	for _, rs := range state.Services[i].Servers {
		names = append(names, serverName(rs))
	}
	return names
}

// serverName is how a real server is named on the command line: its name, or its address.
func serverName(rs ipvsmgr.Server) string {
	if rs.Name != "" {
		return rs.Name
	}
	return rs.Address
}
