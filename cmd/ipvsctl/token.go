package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

const tokenUsage = "usage: ipvsctl token create --user NAME [--name N] [--expires 720h] | token list [--json] | token revoke ID|PREFIX|NAME\n" +
	"\nAn API token acts as its user (with the user's role) for scripts and the remote CLI:\n" +
	"  curl -H \"Authorization: Bearer $TOKEN\" https://director:3636/api/v1/state\n" +
	"Run 'ipvsctl token VERB --help' for a verb's flags."

func runToken(env *cliEnv, args []string) int {
	verb, rest, code, ok := env.subVerb(tokenUsage, args)
	if !ok {
		return code
	}
	switch verb {
	case "create":
		return tokenCreate(env, rest)
	case "list":
		return tokenList(env, rest)
	case "revoke":
		return tokenRevoke(env, rest)
	}
	return env.unknownSubVerb("token", verb)
}

func tokenCreate(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("token create", "--user NAME [--name N] [--expires 720h] [--director]",
		"Make an API token for user NAME and print it, once, on standard output (only the token, so that a\n"+
			"script can capture it); only its hash is kept. --expires takes a duration (720h, 90d); without it\n"+
			"the token lasts until revoked. --director makes the token of a peer director (the other director's\n"+
			"node set --peer-token-file): over TLS it is taken only from that director, with the certificate this\n"+
			"one believes, never through a proxy. A token becomes one anyway at its first call between directors.")
	user := fs.String("user", "", "the user the token acts as (required)")
	name := fs.String("name", "", "a name for the token (default USER-PREFIX)")
	expires := fs.String("expires", "", "how long the token is valid, e.g. 720h or 90d (default: until revoked)")
	director := fs.Bool("director", false, "a peer director's token: over TLS taken only with that director's believed certificate")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl token create: takes no arguments (give --user NAME)")
		return exitUsage
	}
	if *user == "" {
		fmt.Fprintln(env.stderr, "ipvsctl token create: --user NAME is required")
		return exitUsage
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("token create", err, false)
	}
	defer b.close()
	created, err := b.CreateToken(ctx, b.actor, server.TokenRequest{User: *user, Name: *name, Expires: *expires, Director: *director})
	if err != nil {
		return userFail(env, "token create", err)
	}
	t := created.Info
	fmt.Fprintln(env.stdout, created.Token)
	until := "until revoked"
	if t.ExpiresAt != nil {
		until = "until " + t.ExpiresAt.Local().Format(time.DateTime)
	}
	kind := "token"
	if t.DirectorAt != nil {
		kind = "director's token"
	}
	fmt.Fprintf(env.stderr, "ipvsctl token create: %s %d %q (prefix %s) acts as %s, %s. It is shown this once: keep it now.\n",
		kind, t.ID, t.Name, t.Prefix, t.UserName, until)
	return exitOK
}

func tokenList(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("token list", "[--json]", "List the API tokens (never their secrets, which are not kept), revoked ones too.")
	asJSON := fs.Bool("json", false, "print JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "ipvsctl token list: takes no arguments")
		return exitUsage
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("token list", err, false)
	}
	defer b.close()
	tokens, err := b.Tokens(ctx)
	if err != nil {
		return env.fail("token list", err, false)
	}
	if *asJSON {
		return env.printJSON("token list", tokens)
	}
	now := time.Now()
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPREFIX\tUSER\tROLE\tCREATED\tEXPIRES\tLAST USED\tSTATE")
	for _, t := range tokens {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Prefix, t.UserName, t.Role,
			t.CreatedAt.Local().Format(time.DateTime), timeOr(t.ExpiresAt, "never"), timeOr(t.LastUsedAt, "never"), tokenState(&t, now))
	}
	tw.Flush()
	return exitOK
}

func timeOr(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return t.Local().Format(time.DateTime)
}

func tokenState(t *server.Token, now time.Time) string {
	state := "active"
	switch {
	case t.RevokedAt != nil:
		state = "revoked"
	case t.ExpiresAt != nil && !now.Before(*t.ExpiresAt):
		state = "expired"
	}
	if t.DirectorAt != nil {
		state += " (director's)"
	}
	return state
}

func tokenRevoke(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("token revoke", "ID|PREFIX|NAME", "Revoke an API token: it is refused from now on.")
	pos, st, ok := env.parseInterspersed(fs, args)
	if !ok {
		return st
	}
	if len(pos) != 1 {
		fmt.Fprintf(env.stderr, "ipvsctl token revoke: want exactly one token ID, PREFIX or NAME, got %d arguments\n", len(pos))
		return exitUsage
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("token revoke", err, false)
	}
	defer b.close()
	t, err := b.RevokeToken(ctx, b.actor, pos[0])
	if err != nil {
		return userFail(env, "token revoke", err)
	}
	fmt.Fprintf(env.stdout, "revoked token %d %q (prefix %s) of user %s\n", t.ID, t.Name, t.Prefix, t.UserName)
	return exitOK
}
