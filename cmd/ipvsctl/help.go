package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// runHelp shows the same text as VERB --help (or VERB SUB --help); without a
// verb, the list of verbs.
func runHelp(env *cliEnv, args []string) int {
	cmds := commands()
	fs, _ := env.newFlagSet("help", "[COMMAND [SUB-COMMAND]]", "Show a command's synopsis, description and flags: the same text as 'ipvsctl COMMAND --help'.")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	args = fs.Args()
	if len(args) == 0 {
		usage(env.stdout, cmds)
		return exitOK
	}
	cmd, ok := cmds[args[0]]
	if !ok || cmd.hidden || len(args) > 2 || len(args) == 2 && !slices.Contains(cmd.subs, args[1]) {
		fmt.Fprintf(env.stderr, "ipvsctl help: no such command %q\n", strings.Join(args, " "))
		usage(env.stderr, cmds)
		return exitUsage
	}
	helpEnv := *env
	helpEnv.stderr = io.Discard // flag's own copy of the usage; parseFlags prints it on stdout
	helpEnv.cmd = &cmd
	return cmd.run(&helpEnv, append(args[1:], "--help"))
}
