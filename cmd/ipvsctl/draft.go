package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

const draftUsage = "usage: ipvsctl draft list [--json] | draft show|diff [--user NAME] [--json] | draft start|apply|discard\n" +
	"\nDrafts are staged desired states, one per user, made in the panel (\"Stage in a draft\") or with --draft on\n" +
	"the vs, rs and settings verbs (ipvsctl rs drain web r1 --draft): your draft, started from the current state.\n" +
	"apply stores your draft as one revision (refused when the state moved since it was made) and discard throws it away.\n" +
	"Run 'ipvsctl draft VERB --help' for a verb's flags."

func runDraft(env *cliEnv, args []string) int {
	verb, rest, code, ok := env.subVerb(draftUsage, args)
	if !ok {
		return code
	}
	switch verb {
	case "list":
		return draftList(env, rest)
	case "show", "diff":
		return draftShow(env, verb, rest)
	case "start":
		return draftStart(env, rest)
	case "apply":
		return draftApply(env, rest)
	case "discard":
		return draftDiscard(env, rest)
	}
	return env.unknownSubVerb("draft", verb)
}

func draftList(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("draft list", "[--json]", "List every user's draft: its author, the revision it was made from, when it last changed.")
	asJSON := fs.Bool("json", false, "print JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("draft list", err, false)
	}
	defer b.close()
	ds, err := b.Drafts(ctx)
	if err != nil {
		return env.fail("draft list", err, false)
	}
	if *asJSON {
		return env.printJSON("draft list", ds)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AUTHOR\tBASE\tUPDATED")
	for _, d := range ds {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", d.Author, d.Base, d.Updated.Local().Format(time.DateTime))
	}
	tw.Flush()
	return exitOK
}

func draftShow(env *cliEnv, verb string, args []string) int {
	summary := map[string]string{
		"show": "Print a draft's desired-state document (yours, or --user's).",
		"diff": "Show what applying a draft would change: in the document, and in the kernel (ipvsadm commands).",
	}[verb]
	fs, g := env.newFlagSet("draft "+verb, "[--user NAME] [--json]", summary)
	user := fs.String("user", "", "whose draft (default: yours)")
	asJSON := fs.Bool("json", false, "print JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("draft "+verb, err, false)
	}
	defer b.close()
	author := *user
	if author == "" && b.local != nil {
		author = b.actor.Name // a daemon knows who asks (the token's user, the socket's author)
	}
	if verb == "show" {
		doc, err := b.DraftDocument(ctx, author)
		if err != nil {
			return env.fail("draft show", err, false)
		}
		fmt.Fprintln(env.stdout, string(doc))
		return exitOK
	}
	d, err := b.DiffDraft(ctx, author)
	if err != nil {
		return env.fail("draft diff", err, false)
	}
	if *asJSON {
		return env.printJSON("draft diff", d)
	}
	fmt.Fprintf(env.stdout, "# draft of %s, made on revision %d (now %d)\n", d.Author, d.Base, d.Current)
	if d.Moved {
		fmt.Fprintf(env.stdout, "# the state moved since: applying it is refused (%d revisions since)\n", len(d.Since))
	}
	for _, c := range d.Changes {
		fmt.Fprintln(env.stdout, c)
	}
	if d.Kernel != nil {
		for _, c := range d.Kernel.Changes {
			fmt.Fprintln(env.stdout, c)
		}
	} else if d.KernelErr != "" {
		fmt.Fprintln(env.stdout, "# kernel changes unknown: "+d.KernelErr)
	}
	return exitOK
}

func draftStart(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("draft start", "[--json]",
		"Start your draft from the current state (yours is kept if you have one); the vs, rs and settings verbs\nwith --draft stage in it (they start it too).")
	asJSON := fs.Bool("json", false, "print JSON")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("draft start", err, false)
	}
	defer b.close()
	d, err := b.StartDraft(ctx, b.actor)
	if err != nil {
		return env.fail("draft start", err, false)
	}
	if *asJSON {
		return env.printJSON("draft start", d)
	}
	fmt.Fprintf(env.stderr, "draft of %s, made on revision %d: stage in it with --draft on the vs, rs and settings verbs\n", d.Author, d.Base)
	return exitOK
}

func draftApply(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("draft apply", "[--no-apply] [--no-wait] [--json]",
		"Store your draft as one revision (refused when the state moved since it was made), then reconcile.")
	var o writeOpts
	o.register(fs)
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	return env.write("draft apply", g, o, func(ctx context.Context, b *backend) (*server.WriteResult, error) {
		return b.ApplyDraft(ctx, b.actor, "", env.options(o))
	})
}

func draftDiscard(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("draft discard", "", "Throw your draft away.")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	ctx := context.Background()
	b, err := env.backend(ctx, g)
	if err != nil {
		return env.fail("draft discard", err, false)
	}
	defer b.close()
	if err := b.DiscardDraft(ctx, b.actor); err != nil {
		return env.fail("draft discard", err, false)
	}
	fmt.Fprintln(env.stderr, "draft discarded")
	return exitOK
}
