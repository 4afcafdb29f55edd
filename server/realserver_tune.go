package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
)

// Real-server tuning over SSH (`ipvsctl realserver tune`, POST
// /api/v1/realservers/tune/{op}): the TCP settings, the host-wide buffer,
// queue and file limits, and the application's listen backlog, checked,
// raised or put back, each run audited as "realserver tune OP".

// Real-server tune operations.
const (
	RealServerTuneCheck = "check"
	RealServerTunePush  = "push"
	RealServerTuneUndo  = "undo"
)

// RealServerTuneRequest names the real servers (as a preparation does) and
// the application's ports whose listen backlog is read (none: every
// listener but SSH's).
type RealServerTuneRequest struct {
	RealServerSelection
	Ports []int `json:"ports,omitempty"`
	// Apply, with push, also writes what may be written safely for the web
	// servers (an nginx drop-in validated by nginx -t before a reload);
	// without it push changes the sysctls only and the web servers'
	// findings are advice.
	Apply bool `json:"apply,omitempty"`
}

// RealServerTuneReport is a tune run: a result with its findings per real
// server worked on, and the desired state's real servers left out.
type RealServerTuneReport struct {
	Op      string                `json:"op"`
	Results []arpguard.TuneResult `json:"results"`
	Skipped []RealServerSkip      `json:"skipped"`
}

// TuneRealServers checks, pushes or undoes the real servers' tuning over
// SSH with this process's SSH settings, and audits the run. A real server
// that fails is a result; the error is for a run that could not start.
// The results are not stored as the real servers' last preparation: that
// record is ARP hiding's.
func (c *Core) TuneRealServers(ctx context.Context, a Actor, op string, req RealServerTuneRequest) (rep *RealServerTuneReport, err error) {
	if op != RealServerTuneCheck && op != RealServerTunePush && op != RealServerTuneUndo {
		return nil, errorf(CodeNotFound, "real-server tune: %q: want check, push or undo", op)
	}
	var targets []arpguard.Target
	defer func() { c.auditTune(ctx, a, op, req, targets, rep, err) }()
	for i, p := range req.Ports {
		if p < 1 || p > 65535 {
			return nil, errorf(CodeBadInput, "ports[%d]: %d is not a port 1..65535", i, p)
		}
	}
	rep = &RealServerTuneReport{Op: op, Results: []arpguard.TuneResult{}}
	var p *arpguard.Pusher
	// A target's VIPs and mode do not matter to tuning: only its address and SSH port.
	if targets, rep.Skipped, p, err = c.runTargets(ctx, req.Targets, req.RIPs, false); err != nil {
		return nil, err
	}
	if p == nil {
		return rep, nil // no real servers
	}
	switch op {
	case RealServerTuneCheck:
		rep.Results = p.TuneCheck(ctx, targets, req.Ports)
	case RealServerTunePush:
		rep.Results = p.TunePush(ctx, targets, req.Ports, req.Apply)
	case RealServerTuneUndo:
		rep.Results = p.TuneUndo(ctx, targets)
	}
	return rep, nil
}

// auditTune records a tune run: which real servers, what it found or changed.
func (c *Core) auditTune(ctx context.Context, a Actor, op string, req RealServerTuneRequest, targets []arpguard.Target, rep *RealServerTuneReport, err error) {
	if c.store == nil {
		return
	}
	detail := ""
	if rep != nil {
		detail = TuneSummary(rep)
		// The files written on the web servers, each named.
		for _, r := range rep.Results {
			for _, ch := range r.Changed {
				if strings.HasPrefix(ch, "nginx ") || strings.HasPrefix(ch, "systemd ") {
					detail += "; " + r.Target + ": " + ch
				}
			}
		}
	}
	if op == RealServerTunePush && req.Apply {
		op += " --apply"
	}
	c.audit(ctx, a, "realserver tune "+op, realServersTarget(targets, req.RIPs), nil, err, detail)
}

// TuneSummary counts a tune run's results: "2 tuned, 1 to change (5
// settings), 1 unreachable; 3 changes".
func TuneSummary(rep *RealServerTuneReport) string {
	var parts []string
	changes, toChange := 0, 0
	for _, r := range rep.Results {
		changes += len(r.Changed)
		for _, f := range r.Findings {
			if f.Status == tune.Change || f.Status == tune.Far {
				toChange++
			}
		}
	}
	word := map[arpguard.State]string{arpguard.StatePrepared: "tuned", arpguard.StateDrift: "to change"}
	for _, st := range []arpguard.State{arpguard.StatePrepared, arpguard.StateUndone, arpguard.StateDrift, arpguard.StateUnreachable, arpguard.StateFailed} {
		n := 0
		for _, r := range rep.Results {
			if r.State == st {
				n++
			}
		}
		if n == 0 {
			continue
		}
		w := word[st]
		if w == "" {
			w = string(st)
		}
		s := fmt.Sprintf("%d %s", n, w)
		if st == arpguard.StateDrift {
			s += fmt.Sprintf(" (%d settings)", toChange)
		}
		parts = append(parts, s)
	}
	s := strings.Join(parts, ", ")
	if s == "" {
		s = "no real server"
	}
	if changes > 0 {
		verb := map[string]string{RealServerTunePush: "changed", RealServerTuneUndo: "undone"}[rep.Op]
		s += fmt.Sprintf("; %d settings %s", changes, verb)
	}
	if n := len(rep.Skipped); n > 0 {
		s += fmt.Sprintf("; %d left out (%s: %s)", n, rep.Skipped[0].RIP, rep.Skipped[0].Problem)
	}
	return s
}
