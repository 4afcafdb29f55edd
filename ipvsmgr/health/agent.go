package health

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// checkAgent speaks HAProxy's agent-check protocol: the agent answers a
// connection with one line of words: up (or ready), down (or fail,
// stopped), maint, drain, and/or a percentage of the configured weight
// ("75%"); what follows a '#' is a description.
func checkAgent(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	conn, err := dial(ctx, "tcp", spec.Target.String())
	if err != nil {
		return describe(ctx, spec, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	var reply []byte
	buf := make([]byte, 512)
	for len(reply) < 512 && !strings.ContainsAny(string(reply), "\n\r") {
		n, err := conn.Read(buf[:512-len(reply)])
		reply = append(reply, buf[:n]...)
		if err != nil {
			if isEOF(err) && len(reply) > 0 {
				break
			}
			if isEOF(err) {
				return fail("agent: empty reply")
			}
			return describe(ctx, spec, err)
		}
	}
	return parseAgent(string(reply))
}

func parseAgent(reply string) Result {
	line, _, _ := strings.Cut(reply, "\n")
	line, desc, _ := strings.Cut(strings.TrimRight(line, "\r"), "#")
	desc = strings.TrimSpace(desc)
	r := pass("agent: " + strings.TrimSpace(line))
	state := ""
	for _, w := range strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' }) {
		switch w = strings.ToLower(w); w {
		case "up", "ready":
			state = "up"
		case "down", "fail", "stopped", "maint":
			state = w
		case "drain":
			r.Percent = 0
		default:
			if p, ok := strings.CutSuffix(w, "%"); ok {
				if n, err := strconv.Atoi(p); err == nil && n >= 0 {
					r.Percent = min(n, 1000)
				}
			}
		}
	}
	if state != "" && state != "up" {
		reason := "agent: " + state
		if desc != "" {
			reason += " (" + shorten(desc) + ")"
		}
		return fail(reason)
	}
	if state == "" && r.Percent < 0 {
		return fail("agent: no state or weight in " + quoteStart([]byte(line)))
	}
	return r
}
