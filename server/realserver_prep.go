package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/server/realserver"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// Real-server preparation over SSH: push, verify and undo, for the
// realserver verbs, the API and the panel's Verify buttons.

// RealServerSSH is how this process logs in to real servers: the
// realserver verbs' flags, or serve's --ssh-* flags.
type RealServerSSH struct {
	arpguard.SSHConfig
	// Unavailable, when there is no identity, says so and how to give one
	// (which flag); the panel shows it beside its disabled buttons.
	Unavailable string
}

// RealServerSelection says which real servers to work on: Targets as given
// (the CLI's flags or targets file), or else the desired state's real
// servers at RIPs, or else all of them.
type RealServerSelection struct {
	Targets []arpguard.Target `json:"targets,omitempty"`
	RIPs    []string          `json:"rips,omitempty"`
}

// RealServerReport is what a push, verify or undo found: a result per real
// server it worked on (each stored as that server's last), and the desired
// state's real servers it could not work on, with why.
type RealServerReport struct {
	Op      string            `json:"op"`
	Results []arpguard.Result `json:"results"`
	Skipped []RealServerSkip  `json:"skipped"`
}

// RealServerSkip is a real server of the desired state left out, and why.
type RealServerSkip struct {
	RIP     string `json:"rip"`
	Problem string `json:"problem"`
}

// Real-server operations.
const (
	RealServerPush   = "push"
	RealServerVerify = "verify"
	RealServerUndo   = "undo"
)

// RealServers lists the desired state's real-server addresses with what
// preparing them takes and their last results.
func (c *Core) RealServers(ctx context.Context) ([]RealServerPrep, error) {
	st, _, err := c.State(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := c.store.RealServerRecords(ctx)
	if err != nil {
		return nil, err
	}
	return realserver.Preps(st, recs, ServiceID), nil
}

// RealServerSSHUnavailable says why this process cannot log in to real
// servers ("" when it can).
func (c *Core) RealServerSSHUnavailable() string {
	if len(c.rsSSH.Signers) > 0 {
		return ""
	}
	if c.rsSSH.Unavailable != "" {
		return c.rsSSH.Unavailable
	}
	return "no SSH identity is configured for real servers (ipvsctl serve --ssh-identity FILE)"
}

// PrepareRealServers pushes, verifies or undoes the preparation of the
// selected real servers over SSH, stores each one's result as its last, and
// audits the run. A real server that fails is a result, not an error: the
// error is for a run that could not start (bad selection, no identity).
func (c *Core) PrepareRealServers(ctx context.Context, a Actor, op string, sel RealServerSelection) (rep *RealServerReport, err error) {
	if op != RealServerPush && op != RealServerVerify && op != RealServerUndo {
		return nil, errorf(CodeNotFound, "real servers: %q: want push, verify or undo", op)
	}
	var targets []arpguard.Target
	defer func() { c.auditPrep(ctx, a, op, sel, targets, rep, err) }()
	rep = &RealServerReport{Op: op, Results: []arpguard.Result{}}
	var p *arpguard.Pusher
	if targets, rep.Skipped, p, err = c.runTargets(ctx, sel.Targets, sel.RIPs, op != RealServerUndo); err != nil {
		return nil, err
	}
	if p == nil {
		return rep, nil // no real servers
	}
	given := len(sel.Targets) > 0
	switch op {
	case RealServerPush:
		rep.Results = p.Push(ctx, targets)
	case RealServerVerify:
		rep.Results = p.Verify(ctx, targets)
	case RealServerUndo:
		rep.Results = p.Undo(ctx, targets)
	}
	c.saveResults(ctx, rep.Results, targets, given && op != RealServerUndo)
	return rep, nil
}

// runTargets are the real servers a run works on and the pusher that
// reaches them: the targets given, checked (validate: their VIPs and mode
// too), else the desired state's at rips, those skipped that cannot be
// made into a target. p is nil when there are none.
func (c *Core) runTargets(ctx context.Context, given []arpguard.Target, rips []string, validate bool) (targets []arpguard.Target, skipped []RealServerSkip, p *arpguard.Pusher, err error) {
	if len(given) > 0 {
		targets, skipped = given, []RealServerSkip{}
		if err := badInput(realserver.CheckTargets(given, validate)); err != nil {
			return targets, skipped, nil, err
		}
	} else if targets, skipped, err = c.stateTargets(ctx, rips); err != nil {
		return nil, nil, nil, err
	}
	if len(targets) == 0 {
		return targets, skipped, nil, nil
	}
	p, err = c.pusher()
	return targets, skipped, p, err
}

// stateTargets are the desired state's real servers at rips (all when
// none), those that cannot be made into a target skipped.
func (c *Core) stateTargets(ctx context.Context, rips []string) ([]arpguard.Target, []RealServerSkip, error) {
	if c.store == nil {
		return nil, nil, errorf(CodeUnavailable, "the state database is not open: name real servers with --rip or --targets")
	}
	preps, err := c.RealServers(ctx)
	if err != nil {
		return nil, nil, err
	}
	byRIP := map[string]*RealServerPrep{}
	for i := range preps {
		byRIP[preps[i].RIP] = &preps[i]
	}
	chosen := preps
	if len(rips) > 0 {
		chosen = nil
		for _, rip := range rips {
			p := byRIP[rip]
			if p == nil {
				return nil, nil, errorf(CodeNotFound, "real server %s: no virtual service has it", rip)
			}
			chosen = append(chosen, *p)
		}
	}
	var ts []arpguard.Target
	skipped := []RealServerSkip{}
	for _, p := range chosen {
		if p.Target == nil {
			skipped = append(skipped, RealServerSkip{RIP: p.RIP, Problem: p.Problem})
			continue
		}
		ts = append(ts, *p.Target)
	}
	return ts, skipped, nil
}

func (c *Core) pusher() (*arpguard.Pusher, error) {
	if why := c.RealServerSSHUnavailable(); why != "" {
		return nil, &Error{Code: CodeUnavailable, Msg: why}
	}
	cfg := c.rsSSH.SSHConfig
	if cfg.Logger == nil {
		cfg.Logger = c.log
	}
	if cfg.Paths == (arpguard.Paths{}) {
		cfg.Paths = arpguard.DefaultPaths()
	}
	p, err := arpguard.NewPusher(cfg)
	return p, badInput(err)
}

// saveResults keeps each result as its real server's last, with the target
// when it was given (remember), for verifies from the desired state. A
// result that cannot be stored is logged: the run itself stands.
func (c *Core) saveResults(ctx context.Context, rs []arpguard.Result, targets []arpguard.Target, remember bool) {
	if c.store == nil {
		return // a CLI that could not open the database still prepares real servers
	}
	recs := make([]store.RealServerRecord, len(rs))
	for i := range rs {
		recs[i].Result = rs[i]
		if remember {
			t := targets[i]
			recs[i].Spec = &t
		}
	}
	if err := c.store.SaveRealServerRecords(context.WithoutCancel(ctx), recs); err != nil {
		c.log.Error("results not stored", "err", err)
	}
	c.resultsGen.Add(1)
}

// auditPrep records a run: which real servers, and how many ended in each state.
func (c *Core) auditPrep(ctx context.Context, a Actor, op string, sel RealServerSelection, targets []arpguard.Target, rep *RealServerReport, err error) {
	if c.store == nil {
		return
	}
	detail := ""
	if rep != nil {
		detail = PrepSummary(rep)
	}
	c.audit(ctx, a, "realserver "+op, realServersTarget(targets, sel.RIPs), nil, err, detail)
}

// realServersTarget is the audit's target of a run over real servers: the
// one it reached, how many, or the addresses asked for.
func realServersTarget(targets []arpguard.Target, rips []string) string {
	switch {
	case len(targets) == 1:
		return targets[0].Label()
	case len(targets) > 1:
		return fmt.Sprintf("%d real servers", len(targets))
	case len(rips) > 0:
		return strings.Join(rips, ",")
	}
	return "every real server"
}

// PrepSummary counts a report's results by state: "2 prepared, 1 drift; 1 not verified".
func PrepSummary(rep *RealServerReport) string {
	var parts []string
	for _, st := range []arpguard.State{arpguard.StatePrepared, arpguard.StateUndone, arpguard.StateDrift, arpguard.StateUnreachable, arpguard.StateFailed} {
		n := 0
		for _, r := range rep.Results {
			if r.State == st {
				n++
			}
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	done := map[string]string{RealServerPush: "pushed", RealServerVerify: "verified", RealServerUndo: "undone"}[rep.Op]
	s := strings.Join(parts, ", ")
	if s == "" {
		s = "no real server " + done
	}
	if n := len(rep.Skipped); n > 0 {
		s += fmt.Sprintf("; %d not %s (%s: %s)", n, done, rep.Skipped[0].RIP, rep.Skipped[0].Problem)
	}
	return s
}

// RealServerPrep is one real-server address of the desired state as its
// preparation sees it (package realserver).
type RealServerPrep = realserver.Prep

// badInput marks err as an error in what was asked, keeping its message.
func badInput(err error) error {
	if err == nil || CodeOf(err) != CodeInternal {
		return err
	}
	return &Error{Code: CodeBadInput, Msg: err.Error()}
}

// RealServerResults is the last preparation result (push, verify, undo) per real server.
func (c *Core) RealServerResults(ctx context.Context) ([]arpguard.Result, error) {
	return c.store.Results(ctx)
}
