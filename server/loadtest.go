package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/server/store"
)

// A load test's runs (scripts/loadtest.sh --lab): the load generator's
// script marks each run's start and end through the core (`ipvsctl loadtest
// start|end`, POST /api/v1/loadtest/runs), so that the panel's Tuning page
// can draw the sampler's charts of the same span, each run shaded with its
// phase, beside the figures the load generator printed.

// Load-test phases: the kernel's settings during a run (Phase), and its
// real servers' web servers' (WebPhase: nginx or HAProxy as shipped, or
// after realserver tune push --apply; optional).
const (
	PhaseDefault = "default"
	PhaseTuned   = "tuned"
)

// LoadRunStart is a run that starts now: which test it belongs to, its
// phase, the virtual service the load goes through and the load generator.
type LoadRunStart struct {
	Test     string `json:"test"`
	Phase    string `json:"phase"`
	WebPhase string `json:"web_phase,omitempty"`
	Service  string `json:"service"`
	Tool     string `json:"tool,omitempty"`
}

// LoadResult is what the load generator measured over a run, with the
// director's CPU and softirq share (0..1) and its connection table.
type LoadResult struct {
	RPS       float64 `json:"rps"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	CPU       float64 `json:"cpu"`
	Softirq   float64 `json:"softirq"`
	Entries   int     `json:"entries"`
	Buckets   int     `json:"buckets"`
	Requests  int64   `json:"requests,omitempty"`
	Errors    string  `json:"errors,omitempty"`
	Transfers string  `json:"transfers,omitempty"`
}

// LoadRun is a stored run.
type LoadRun struct {
	ID int64 `json:"id"`
	LoadRunStart
	StartedAt time.Time   `json:"started_at"`
	EndedAt   *time.Time  `json:"ended_at,omitempty"`
	Result    *LoadResult `json:"result,omitempty"`
}

// StartLoadRun marks a run's start (now) and returns it, audited as
// "loadtest start".
func (c *Core) StartLoadRun(ctx context.Context, a Actor, s LoadRunStart) (run *LoadRun, err error) {
	defer func() {
		target := s.Test + " " + s.Phase + " " + s.Service
		if s.WebPhase != "" {
			target += " web " + s.WebPhase
		}
		detail := ""
		if run != nil {
			detail = fmt.Sprintf("run %d", run.ID)
		}
		c.auditIf(ctx, a, "loadtest start", target, err, detail)
	}()
	if err := allow(a, "loadtest start", RoleFor("loadtest start")); err != nil {
		return nil, err
	}
	if s.Service, err = c.checkLoadRunStart(ctx, s); err != nil {
		return nil, err
	}
	r := store.LoadRun{Test: s.Test, Phase: s.Phase, WebPhase: s.WebPhase, Service: s.Service, Tool: s.Tool, StartedAt: c.now()}
	id, err := c.store.StartLoadRun(ctx, r)
	if err != nil {
		return nil, err
	}
	return &LoadRun{ID: id, LoadRunStart: s, StartedAt: r.StartedAt}, nil
}

// checkLoadRunStart refuses a bad start; it returns the service's name
// (the run is kept under it, however it was given).
func (c *Core) checkLoadRunStart(ctx context.Context, s LoadRunStart) (string, error) {
	if c.store == nil {
		return "", errorf(CodeUnavailable, "the state database is not open: a load run is recorded there")
	}
	if strings.TrimSpace(s.Test) == "" || len(s.Test) > 100 {
		return "", errorf(CodeBadInput, "test: %q: give the load test's name (1 to 100 characters)", s.Test)
	}
	if s.Phase != PhaseDefault && s.Phase != PhaseTuned {
		return "", errorf(CodeBadInput, "phase: %q is not default or tuned", s.Phase)
	}
	if s.WebPhase != "" && s.WebPhase != PhaseDefault && s.WebPhase != PhaseTuned {
		return "", errorf(CodeBadInput, "web_phase: %q is not default or tuned (or left out)", s.WebPhase)
	}
	if len(s.Tool) > 200 {
		return "", errorf(CodeBadInput, "tool: %d characters, at most 200", len(s.Tool))
	}
	st, _, err := c.State(ctx)
	if err != nil {
		return "", err
	}
	i, err := FindService(st, s.Service)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Code == CodeNotFound {
			return "", errorf(CodeBadInput, "service: %q is not a virtual service of the desired state", s.Service)
		}
		return "", err
	}
	if st.Services[i].Name != "" {
		return st.Services[i].Name, nil
	}
	return serviceKey(&st.Services[i]), nil
}

// EndLoadRun marks run id's end (now) with what the load generator
// measured, audited as "loadtest end".
func (c *Core) EndLoadRun(ctx context.Context, a Actor, id int64, res LoadResult) (run *LoadRun, err error) {
	defer func() { c.auditIf(ctx, a, "loadtest end", fmt.Sprintf("run %d", id), err, loadResultLine(&res)) }()
	if err := allow(a, "loadtest end", RoleFor("loadtest end")); err != nil {
		return nil, err
	}
	if c.store == nil {
		return nil, errorf(CodeUnavailable, "the state database is not open: a load run is recorded there")
	}
	if err := checkLoadResult(res); err != nil {
		return nil, err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encode load run %d's result: %w", id, err)
	}
	if err := c.store.EndLoadRun(ctx, id, c.now(), string(b)); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, errorf(CodeNotFound, "load run %d: not started, or ended already", id)
		}
		return nil, err
	}
	r, err := c.store.LoadRun(ctx, id)
	if err != nil {
		return nil, err
	}
	return loadRunOf(r), nil
}

func checkLoadResult(r LoadResult) error {
	for _, f := range []struct {
		name string
		v    float64
		max  float64
	}{{"rps", r.RPS, 1e9}, {"p50_ms", r.P50ms, 1e7}, {"p99_ms", r.P99ms, 1e7}, {"cpu", r.CPU, 1}, {"softirq", r.Softirq, 1}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > f.max {
			return errorf(CodeBadInput, "%s: %v is not between 0 and %v", f.name, f.v, f.max)
		}
	}
	if r.Entries < 0 || r.Buckets < 0 || r.Requests < 0 {
		return errorf(CodeBadInput, "entries, buckets, requests: %d, %d, %d: a count is not negative", r.Entries, r.Buckets, r.Requests)
	}
	if len(r.Errors) > 500 || len(r.Transfers) > 100 {
		return errorf(CodeBadInput, "errors: %d characters, at most 500", len(r.Errors))
	}
	return nil
}

// LoadRuns reads a load test's runs, oldest first ("" for the latest test).
func (c *Core) LoadRuns(ctx context.Context, test string) ([]LoadRun, error) {
	if c.store == nil {
		return nil, errorf(CodeUnavailable, "the state database is not open")
	}
	rs, err := c.store.LoadRuns(ctx, test)
	if err != nil {
		return nil, err
	}
	out := make([]LoadRun, 0, len(rs))
	for _, r := range rs {
		out = append(out, *loadRunOf(r))
	}
	return out, nil
}

func loadRunOf(r store.LoadRun) *LoadRun {
	run := &LoadRun{ID: r.ID, LoadRunStart: LoadRunStart{Test: r.Test, Phase: r.Phase, WebPhase: r.WebPhase, Service: r.Service, Tool: r.Tool},
		StartedAt: r.StartedAt, EndedAt: r.EndedAt}
	if r.Result != "" {
		var res LoadResult
		if json.Unmarshal([]byte(r.Result), &res) == nil {
			run.Result = &res
		}
	}
	return run
}

// loadResultLine is a run's figures on one line, for the audit.
func loadResultLine(r *LoadResult) string {
	return fmt.Sprintf("%.0f req/s, p50 %.1f ms, p99 %.1f ms, CPU %.0f%%, softirq %.0f%%, %d entries / %d buckets",
		r.RPS, r.P50ms, r.P99ms, 100*r.CPU, 100*r.Softirq, r.Entries, r.Buckets)
}

// auditIf records an action when there is a database to record it in.
func (c *Core) auditIf(ctx context.Context, a Actor, action, target string, err error, detail string) {
	if c.store == nil {
		return
	}
	c.audit(ctx, a, action, target, nil, err, detail)
}
