package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/events"
)

func runEvents(env *cliEnv, args []string) int {
	fs, g := env.newFlagSet("events", "[--follow] [--type TYPE,...] [--subject TEXT] [--after ID] [--json]",
		"Print what the director told of, oldest first: real servers down, quiesced, up and back (with the\n"+
			"check's reason), a service's quorum and sorry server, VRRP role changes, BGP routes and sessions,\n"+
			"drift repaired, reconciles that failed, replication failures, revisions stored, logins locked out.\n"+
			"With --follow, go on printing each new event as it happens until interrupted (with --server, over\n"+
			"the API's event stream, resumed where it stopped if the stream is cut). --type takes types or\n"+
			"prefixes (realserver., bgp.); --subject keeps the events whose subject contains the text (an address,\n"+
			"a service, a prefix). --json prints one JSON object a line. Types: "+strings.Join(events.Types, ", ")+".")
	follow := fs.Bool("follow", false, "go on printing new events as they happen")
	types := fs.String("type", "", "only these types or type prefixes (comma-separated)")
	subject := fs.String("subject", "", "only events whose subject contains this")
	after := fs.Int64("after", 0, "only events after this ID")
	asJSON := fs.Bool("json", false, "print each event as a JSON object on its own line")
	if st, ok := env.parseFlags(fs, args); !ok {
		return st
	}
	if fs.NArg() > 0 || *after < 0 {
		fmt.Fprintln(env.stderr, "ipvsctl events: takes no arguments; --after must be 0 or more")
		return exitUsage
	}
	f, err := server.ParseEventFilter([]string{*types}, *subject)
	if err != nil {
		return env.fail("events", err, true)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := env.readBackend(ctx, g)
	if err != nil {
		return env.fail("events", err, false)
	}
	defer b.close()
	print := func(e server.Event) error {
		if *asJSON {
			line, err := json.Marshal(e)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(env.stdout, "%s\n", line)
			return err
		}
		_, err := fmt.Fprintf(env.stdout, "%d  %s  %-24s %s\n", e.ID, e.Time.Local().Format(time.DateTime), e.Type, e.Message)
		return err
	}
	if *follow {
		err = b.WatchEvents(ctx, b.actor, *after, f, print)
	} else {
		var evs []server.Event
		if evs, err = b.ReadEvents(ctx, b.actor, *after, f); err == nil {
			for _, e := range evs {
				if err = print(e); err != nil {
					break
				}
			}
		}
	}
	if err != nil {
		return env.fail("events", err, false)
	}
	return exitOK
}
