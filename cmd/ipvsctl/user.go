package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
)

const userUsage = "usage: ipvsctl user add NAME --role admin|operator|viewer [--password-stdin] | user passwd NAME [--password-stdin]\n" +
	"       | user set NAME --role ROLE | user rm NAME | user list [--json]\n" +
	"\nUsers log in to the panel and hold API tokens. There is no default user and no default password:\n" +
	"make the first admin on the director with 'ipvsctl user add NAME --role admin'.\n" +
	"Run 'ipvsctl user VERB --help' for a verb's flags."

func runUser(env *cliEnv, args []string) int {
	verb, rest, code, ok := env.subVerb(userUsage, args)
	if !ok {
		return code
	}
	switch verb {
	case "add", "passwd", "set", "rm":
		return userWrite(env, verb, rest)
	case "list":
		return userList(env, rest)
	}
	return env.unknownSubVerb("user", verb)
}

func userWrite(env *cliEnv, verb string, args []string) int {
	fs, g := env.newFlagSet("user "+verb, map[string]string{
		"add":    "NAME --role admin|operator|viewer [--password-stdin]",
		"passwd": "NAME [--password-stdin]",
		"set":    "NAME --role admin|operator|viewer",
		"rm":     "NAME",
	}[verb], map[string]string{
		"add": "Add a user who may log in to the panel. The password (12 characters at least) is asked twice on\n" +
			"the terminal, or read from the first line of standard input with --password-stdin.",
		"passwd": "Give user NAME a new password; the user's panel sessions end (API tokens stay).",
		"set":    "Change the role of user NAME; it applies to the user's sessions and tokens at once.",
		"rm":     "Remove user NAME, ending its sessions and revoking its tokens.",
	}[verb])
	var role *string
	var fromStdin *bool
	if verb == "add" || verb == "set" {
		role = fs.String("role", "", "admin, operator or viewer")
	}
	if verb == "add" || verb == "passwd" {
		fromStdin = fs.Bool("password-stdin", false, "read the password from the first line of standard input")
	}
	pos, st, ok := env.parseInterspersed(fs, args)
	if !ok {
		return st
	}
	if len(pos) != 1 {
		fmt.Fprintf(env.stderr, "ipvsctl user %s: want exactly one user NAME, got %d arguments\n", verb, len(pos))
		return exitUsage
	}
	name := pos[0]
	var r auth.Role
	if role != nil {
		var err error
		if r, err = auth.ParseRole(*role); err != nil {
			return userFail(env, "user "+verb, err)
		}
	}
	// The name is checked before a password is asked for.
	if err := auth.CheckName("name", name); err != nil && verb != "rm" {
		return userFail(env, "user "+verb, err)
	}
	var password string
	if fromStdin != nil {
		var err error
		if password, err = readPassword(env, name, *fromStdin); err != nil {
			return userFail(env, "user "+verb, err)
		}
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("user "+verb, err, false)
	}
	defer b.close()
	switch verb {
	case "add":
		err = b.AddUser(ctx, b.actor, server.NewUser{Name: name, Role: r.String(), Password: password})
	case "passwd":
		err = b.SetUserPassword(ctx, b.actor, name, password)
	case "set":
		err = b.SetUserRole(ctx, b.actor, name, r.String())
	case "rm":
		err = b.RemoveUser(ctx, b.actor, name)
	}
	if err != nil {
		return userFail(env, "user "+verb, err)
	}
	fmt.Fprintln(env.stdout, map[string]string{
		"add":    fmt.Sprintf("added user %s (%s)", name, r),
		"passwd": fmt.Sprintf("set the password of user %s; its sessions ended", name),
		"set":    fmt.Sprintf("user %s is now %s", name, r),
		"rm":     fmt.Sprintf("removed user %s; its sessions ended and its tokens were revoked", name),
	}[verb])
	return exitOK
}

// userFail prints the error of verb (the whole command: "user add",
// "token revoke"); invalid input, an unknown user and a name taken are bad
// usage (2), anything else a failure (1).
func userFail(env *cliEnv, verb string, err error) int {
	var inv *auth.InvalidError
	invalid := errors.As(err, &inv) || errors.Is(err, server.ErrNotFound) || errors.Is(err, server.ErrExists) || server.IsUserError(err)
	return env.fail(verb, err, invalid)
}

// readPassword reads a new password: the first line of standard input, or
// twice from the terminal without echo.
func readPassword(env *cliEnv, name string, fromStdin bool) (string, error) {
	if fromStdin {
		line, err := bufio.NewReaderSize(io.LimitReader(os.Stdin, 4096), 4096).ReadString('\n')
		if err != nil && err != io.EOF {
			return "", fmt.Errorf("read the password from standard input: %w", err)
		}
		return strings.TrimRight(line, "\r\n"), auth.CheckPassword(strings.TrimRight(line, "\r\n"))
	}
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return "", userErrorf("password: standard input is not a terminal to ask on; give --password-stdin and the password on standard input")
	}
	fmt.Fprintf(env.stderr, "New password for %s: ", name)
	p1, err := term.ReadPassword(fd)
	fmt.Fprintln(env.stderr)
	if err != nil {
		return "", fmt.Errorf("read the password: %w", err)
	}
	if err := auth.CheckPassword(string(p1)); err != nil {
		return "", err
	}
	fmt.Fprintf(env.stderr, "Again: ")
	p2, err := term.ReadPassword(fd)
	fmt.Fprintln(env.stderr)
	if err != nil {
		return "", fmt.Errorf("read the password: %w", err)
	}
	if string(p1) != string(p2) {
		return "", userErrorf("password: the two entries differ")
	}
	return string(p1), nil
}

func userList(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("user list", "[--json]", "List the users and their roles.")
	asJSON := fs.Bool("json", false, "print JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl user list: takes no arguments")
		return exitUsage
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("user list", err, false)
	}
	defer b.close()
	users, err := b.Users(ctx)
	if err != nil {
		return env.fail("user list", err, false)
	}
	if *asJSON {
		return env.printJSON("user list", users)
	}
	if len(users) == 0 {
		fmt.Fprintln(env.stdout, "# "+strings.ReplaceAll(auth.FirstAdminHint, "\n", "\n#"))
		return exitOK
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tCREATED\tUPDATED")
	for _, u := range users {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", u.Name, u.Role, u.CreatedAt.Local().Format(time.DateTime), u.UpdatedAt.Local().Format(time.DateTime))
	}
	tw.Flush()
	return exitOK
}

// userErrorf is an error in what was asked (exit status 2).
func userErrorf(format string, args ...any) error {
	return &server.Error{Code: server.CodeBadInput, Msg: fmt.Sprintf(format, args...)}
}
