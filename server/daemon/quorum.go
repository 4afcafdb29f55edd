package daemon

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// QuorumRun is one run of a service's quorum_up or quorum_down program.
type QuorumRun struct {
	Service ipvsmgr.ServiceKey
	// Up: quorum_up (the quorum gained), else quorum_down.
	Up bool
	// AtStart: keepalived's "Starting with quorum down".
	AtStart         bool
	Healthy, Quorum int
	Hysteresis      int
	Command         []string
	ExitCode        int // -1: it did not start, or was killed (timeout)
	Err             string
	Started         time.Time
	Elapsed         time.Duration
}

// DefaultQuorumTimeout bounds a quorum program's run.
const DefaultQuorumTimeout = 30 * time.Second

// quorumWatch keeps which side of its quorum each service with a quorum
// policy is on, and runs its program on a change (keepalived's
// update_quorum_state): in a goroutine of its own, with a timeout, so that a
// slow program never holds up a reconcile.
type quorumWatch struct {
	mu   sync.Mutex
	held map[ipvsmgr.ServiceKey]bool
	wg   sync.WaitGroup
	// onRun hears of every run once it ended (metrics).
	onRun func(QuorumRun)
}

// OnQuorumRun calls f after every quorum_up/quorum_down run (metrics). Set it before Run.
func (d *Daemon) OnQuorumRun(f func(QuorumRun)) { d.quorum.onRun = f }

// checkQuorum compares each service's healthy servers with its quorum
// (the sorry server's rule, ipvsmgr.QuorumHeld) and starts the programs of
// those whose side changed. A service is first decided once all its checked
// servers have a health; it then starts on keepalived's side
// (set_quorum_states), and runs quorum_down at once only if it has a sorry
// server and starts below its quorum, as keepalived does.
func (d *Daemon) checkQuorum(ctx context.Context) {
	_, des := d.sk.current()
	if des == nil {
		return
	}
	des = d.sk.overlay(des)
	if len(des.Sorry) == 0 {
		return
	}
	counts := ipvsmgr.HealthyCounts(des.Table, des, des.Health)
	q := &d.quorum
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held == nil {
		q.held = map[ipvsmgr.ServiceKey]bool{}
	}
	seen := make(map[ipvsmgr.ServiceKey]bool, len(des.Sorry))
	for i := range des.Sorry {
		pol := &des.Sorry[i]
		c, ok := counts[pol.Service]
		if !ok {
			continue // not in the kernel (disabled, a backup's)
		}
		seen[pol.Service] = true
		was, known := q.held[pol.Service]
		if !known {
			if !c.Known {
				continue
			}
			now := ipvsmgr.QuorumAtStart(c.Healthy, pol.Quorum, pol.Hysteresis)
			q.held[pol.Service] = now
			if !now && pol.Dest != nil {
				d.startQuorumRun(ctx, pol, false, true, c.Healthy)
			}
			continue
		}
		now := ipvsmgr.QuorumHeld(was, c.Healthy, pol.Quorum, pol.Hysteresis)
		if now == was {
			continue
		}
		q.held[pol.Service] = now
		d.startQuorumRun(ctx, pol, now, false, c.Healthy)
	}
	for k := range q.held {
		if !seen[k] {
			delete(q.held, k) // gone: decided afresh if it comes back
		}
	}
}

// startQuorumRun logs the change and runs its program, if any, in the
// background.
func (d *Daemon) startQuorumRun(ctx context.Context, pol *ipvsmgr.SorryPolicy, up, atStart bool, healthy int) {
	what := "lost quorum"
	cmd := pol.QuorumDown
	if up {
		what, cmd = "gained quorum", pol.QuorumUp
	}
	if atStart {
		what = "starting with quorum down"
	}
	d.Log.Info("service "+what, "service", pol.Service.String(), "healthy", healthy,
		"quorum", pol.Quorum, "hysteresis", pol.Hysteresis, "threshold", ipvsmgr.QuorumThreshold(!up, pol.Quorum, pol.Hysteresis))
	d.quorumEvents(pol, up, atStart, healthy, what)
	if len(cmd) == 0 {
		return
	}
	run := QuorumRun{Service: pol.Service, Up: up, AtStart: atStart, Healthy: healthy, Quorum: pol.Quorum,
		Hysteresis: pol.Hysteresis, Command: cmd}
	timeout := orDuration(d.QuorumTimeout, DefaultQuorumTimeout)
	q := &d.quorum
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		d.runQuorum(ctx, run, timeout)
	}()
}

// runQuorum runs one quorum program to its end or its timeout and logs its
// exit status.
func (d *Daemon) runQuorum(ctx context.Context, run QuorumRun, timeout time.Duration) {
	name := "quorum_down"
	if run.Up {
		name = "quorum_up"
	}
	pr := d.runProgram(ctx, name, run.Command, timeout, "service", run.Service.String())
	run.Started, run.Elapsed, run.ExitCode, run.Err = pr.Started, pr.Elapsed, pr.ExitCode, pr.Err
	if f := d.quorum.onRun; f != nil {
		f(run)
	}
}

// How a program's run ended (OnProgramRun).
const (
	ProgramOK      = "ok"
	ProgramFailed  = "failed" // a non-zero exit status, or it did not start
	ProgramTimeout = "timeout"
)

// OnProgramRun calls f after every run of a program of the document (a
// notify or a quorum program), with its name (notify_up, quorum_down...)
// and how it ended (ProgramOK, ProgramFailed, ProgramTimeout): metrics. Set
// it before Run.
func (d *Daemon) OnProgramRun(f func(name, result string)) { d.onProgram = f }

// auditProgram keeps the run in the audit record, as the daemon's action
// (via cli: the record knows no other local process, and the daemon is
// `ipvsctl serve`): the runs of one program for one subject with one outcome fold into one
// row within the audit's window, so a flapping server cannot flood it.
func (d *Daemon) auditProgram(ctx context.Context, name string, argv []string, run programRun, forWhat []any) {
	var target []string
	for i := 0; i+1 < len(forWhat); i += 2 {
		target = append(target, fmt.Sprint(forWhat[i], " ", forWhat[i+1]))
	}
	e := store.AuditEntry{Actor: "daemon", Via: "cli", Action: "run " + name, Target: strings.Join(target, ", "),
		Outcome: store.OutcomeSuccess, Detail: fmt.Sprintf("%q: exit status %d in %s", argv, run.ExitCode, run.Elapsed.Round(time.Millisecond))}
	if run.Err != "" {
		e.Outcome, e.Detail = store.OutcomeFailure, fmt.Sprintf("%q: %s", argv, run.Err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := d.store.WriteAuditFold(ctx, e, auth.AuditRepeatWindow); err != nil {
		d.Log.Error("audit record lost", "action", e.Action, "target", e.Target, "err", err)
	}
}

// programRun is how one program the daemon ran (a quorum or a notify
// program) ended.
type programRun struct {
	Started  time.Time
	Elapsed  time.Duration
	ExitCode int // -1: it did not start, or was killed (timeout)
	Err      string
}

// runProgram runs argv, as the program name names it (quorum_up,
// notify_master), to its end or its timeout, and logs how it ended with
// attrs (what it ran for). The one way the daemon runs the programs of the
// document.
func (d *Daemon) runProgram(ctx context.Context, name string, argv []string, timeout time.Duration, attrs ...any) programRun {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	run := programRun{Started: start, Elapsed: time.Since(start), ExitCode: -1}
	if cmd.ProcessState != nil {
		run.ExitCode = cmd.ProcessState.ExitCode()
	}
	forWhat := attrs
	attrs = append(slices.Clip(attrs), "program", name, "command", argv, "exit status", run.ExitCode, "elapsed", run.Elapsed.Round(time.Millisecond))
	if len(out) > 0 {
		attrs = append(attrs, "output", string(out[:min(len(out), 512)]))
	}
	var ee *exec.ExitError
	result := ProgramOK
	switch {
	case err == nil:
		d.Log.Info("program ran", attrs...)
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		run.Err, result = "timed out after "+timeout.String(), ProgramTimeout
		d.Log.Error("program timed out; killed", append(attrs, "timeout", timeout)...)
	case errors.As(err, &ee):
		run.Err, result = err.Error(), ProgramFailed
		d.Log.Warn("program failed", attrs...)
	default:
		run.Err, result = err.Error(), ProgramFailed
		d.Log.Error("program did not run", append(attrs, "err", err)...)
	}
	if d.onProgram != nil {
		d.onProgram(name, result)
	}
	d.auditProgram(ctx, name, argv, run, forWhat)
	return run
}
