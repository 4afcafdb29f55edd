// Package server is ipvsctl's core: one Core whose methods are every change
// and every read the CLI, the API and the panel make, over the store. The
// kernel is reached through one Runtime (runtime.go): the daemon's kernel
// session once a daemon attaches (package server/daemon), else the local
// one of a CLI. The rooms beside it (server/daemon, server/redundancy,
// server/replication) import the core, never the reverse; what they need of
// it is exported methods and small handles (Role, RoleOverlay, SetBGPStatus),
// not its fields.
package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/events"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// Actor is who makes a change and through which interface.
type Actor struct {
	Name string // user name
	Via  string // cli, api, panel
	Addr string // client address, for the audit ("" for a local CLI)
	// Role is what the actor may do (Policy); zero for a caller in this
	// process trusted with the database (the CLI without a daemon).
	Role auth.Role
}

// WriteOptions are what every change takes besides the change itself.
type WriteOptions struct {
	NoApply bool  // only store; do not touch the kernel
	NoWait  bool  // do not wait for draining real servers
	Base    int64 // refuse unless the stored state is still at this revision (0: any, unless BaseEmpty)
	// BaseEmpty refuses unless no revision is stored yet: If-Match "0", the
	// ETag of a new director's empty store.
	BaseEmpty bool
	// Progress, if set, hears of the drains under way while the change waits for them.
	Progress func([]ipvsmgr.Retiring) `json:"-"`
	// Draft stages a Write's edits in the actor's draft (started when they
	// have none) instead: nothing is stored as a revision, nothing reaches
	// the kernel.
	Draft bool
	// IntoOpenDraft stages a Write's edits when the actor has a draft (and
	// may stage), else makes them: the panel's rule, "once you start a
	// draft your edits collect in it", decided here on the core's drafts.
	IntoOpenDraft bool `json:"-"`
}

// noDraft refuses Draft for a change that replaces the whole document.
func (o WriteOptions) noDraft(action string) error {
	if o.Draft {
		return errorf(CodeBadInput, "draft: %s cannot be staged in a draft (stage its edits, or import into the panel's draft)", action)
	}
	return nil
}

// stale refuses a write based on a revision that is not the current one.
func (o WriteOptions) stale(current int64) error {
	if (o.Base != 0 || o.BaseEmpty) && o.Base != current {
		return &store.StaleError{Base: o.Base, Current: current}
	}
	return nil
}

// WriteResult is what a change did: the revision it made (or found equal) and
// the kernel changes of its reconcile.
type WriteResult struct {
	Revision int64 `json:"revision"`
	Changed  bool  `json:"changed"` // a new revision was stored
	Applied  bool  `json:"applied"` // the kernel was reconciled
	ipvsmgr.Result
	// Counts are the kernel changes counted by kind.
	Counts string `json:"counts"`
	// Draft is the actor's draft the edits were staged in (WriteOptions.Draft).
	Draft *DraftInfo `json:"draft,omitempty"`
}

// Core is the one place changes and reads go through.
type Core struct {
	store *store.Store
	open  func() (*KernelConn, error)
	log   *slog.Logger
	// tuneHost is where Tuning reads the director's settings (nil: /).
	tuneHost tune.Host
	// lockPath, when set, is the flock a reconcile holds (a CLI without a
	// daemon); the daemon holds it for its whole life and leaves this empty.
	lockPath string
	now      func() time.Time

	// rt is the kernel session: the daemon's once one attaches
	// (DaemonSide.Attach), else the local one (runtime.go); live is the
	// daemon's, nil without one.
	rt   Runtime
	live LiveRuntime
	w    stateWriter // how the current state is read and written (current.go)
	red  *redState   // the director's VRRP role (role.go)
	bgp  bgpState    // the BGP runner's status (bgp.go)
	// alerts reads the daemon's alert deliveries (alerts_status.go).
	alerts atomic.Pointer[func() []AlertDelivery]
	// checker is the health checker's own health (checker.go).
	checker checkerState

	rsSSH    RealServerSSH // how real servers are reached (realserver_prep.go)
	identity string        // this director's certificate file (node.go)
	// resultsGen counts the changes of the stored real-server results: this
	// core's saves, and in the daemon another process's (noticeResults).
	resultsGen atomic.Int64
	accounts   *auth.Auth    // users and tokens (core_users.go)
	drafts     draftCache    // the users' drafts (drafts.go, drafts_cache.go)
	followers  followerTable // the directors following this one (followers.go)
	checkRuns  *userRate     // "test this check now", per user (health.go)
	events     *events.Log   // what the daemon tells of (nil in a CLI's process)
}

// Config configures a Core.
type Config struct {
	Store *store.Store
	// OpenKernel opens the kernel for one reconcile or read; nil means the host's.
	OpenKernel func() (*KernelConn, error)
	Log        *slog.Logger
	// LockPath is the kernel lock file ("" for none).
	LockPath string
	// RealServerSSH is how real servers are logged in to for push, verify
	// and undo; without an identity those say RealServerSSH.Unavailable.
	RealServerSSH RealServerSSH
	// Auth is the daemon's user and token rules; nil makes them over Store.
	Auth *auth.Auth
	// TuneHost is where Tuning reads /proc and /sys; nil means the host's root.
	TuneHost tune.Host
	// IdentityCert is the certificate this director's API shows (its
	// fingerprint is what the peer pins); "" for the self-signed one
	// beside the database.
	IdentityCert string
	// Events is the daemon's event log (server/events); nil in a process
	// that is not the daemon, which tells of nothing.
	Events *events.Log
}

// New returns a Core over a store.
func New(cfg Config) *Core {
	c := &Core{store: cfg.Store, open: cfg.OpenKernel, log: cfg.Log, lockPath: cfg.LockPath, now: time.Now, red: newRedState(),
		rsSSH: cfg.RealServerSSH, tuneHost: cfg.TuneHost, identity: cfg.IdentityCert, events: cfg.Events, checkRuns: newUserRate(CheckRunsPerUser, CheckRunsWindow)}
	if c.open == nil {
		c.open = OpenHostKernel
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.accounts = newAccounts(cfg, c)
	c.rt, c.w = localRuntime{c}, storeWriter{c}
	return c
}

// State returns the stored desired state and its revision: in the daemon,
// a copy of the one it holds (no decoding of the document per request).
func (c *Core) State(ctx context.Context) (*ipvsmgr.State, int64, error) {
	return c.w.state(ctx)
}

// Apply replaces the desired state with the document (a new revision unless
// it is equal to the current one), then makes the kernel match it. label
// says where the document came from, for the history.
func (c *Core) Apply(ctx context.Context, a Actor, doc io.Reader, label string, o WriteOptions) (res *WriteResult, err error) {
	defer func() { c.audit(ctx, a, "apply", label, res, err, "") }()
	if err := allow(a, "apply", RoleFor("apply")); err != nil {
		return nil, err
	}
	if err := o.noDraft("apply"); err != nil {
		return nil, err
	}
	if err := c.refuseOnBackup(a); err != nil {
		return nil, err
	}
	apply, release, err := c.rt.BeginWrite(ctx, o)
	if err != nil {
		return nil, err
	}
	defer release()
	stored := c.readStored(ctx)
	st, err := ipvsmgr.DecodeState(doc)
	if err != nil {
		return nil, err
	}
	desired, err := ipvsmgr.Compile(st)
	if err != nil {
		return nil, err
	}
	return c.replace(ctx, a, label, st, desired, o, apply, stored)
}

// applyState replaces the desired state with st, audited as action.
func (c *Core) applyState(ctx context.Context, a Actor, action string, st *ipvsmgr.State, label string, o WriteOptions) (res *WriteResult, err error) {
	defer func() { c.audit(ctx, a, action, label, res, err, "") }()
	if err := allow(a, action, RoleFor(action)); err != nil {
		return nil, err
	}
	if err := allow(a, "apply", RoleFor("apply")); err != nil {
		return nil, err
	}
	if err := o.noDraft(action); err != nil {
		return nil, err
	}
	if err := c.refuseOnBackup(a); err != nil {
		return nil, err
	}
	desired, err := ipvsmgr.Compile(st)
	if err != nil {
		return nil, err
	}
	apply, release, err := c.rt.BeginWrite(ctx, o)
	if err != nil {
		return nil, err
	}
	defer release()
	return c.replace(ctx, a, label, st, desired, o, apply, c.readStored(ctx))
}

// storedDoc is the current document as read when a write began; parsed
// splits it (in the background).
type storedDoc struct {
	base   int64
	doc    []byte
	parsed func() (*store.StoredState, error)
}

// readStored reads the current document in the background.
func (c *Core) readStored(ctx context.Context) func() (*storedDoc, error) {
	ch := make(chan error, 1)
	sd := &storedDoc{}
	go func() {
		var err error
		sd.base, sd.doc, err = c.store.CurrentDocument(ctx)
		parsed := make(chan struct{})
		var was *store.StoredState
		var perr error
		sd.parsed = func() (*store.StoredState, error) { <-parsed; return was, perr }
		ch <- err
		if err == nil {
			was, perr = store.ParseStored(sd.doc)
		}
		close(parsed)
	}()
	return func() (*storedDoc, error) {
		if err := <-ch; err != nil {
			return nil, err
		}
		return sd, nil
	}
}

func (c *Core) replace(ctx context.Context, a Actor, label string, doc *ipvsmgr.State, desired *ipvsmgr.Desired, o WriteOptions,
	apply ApplyFunc, stored func() (*storedDoc, error)) (*WriteResult, error) {
	sd, err := stored()
	if err != nil {
		return nil, err
	}
	enc, encServices, err := store.EncodeServices(doc)
	if err != nil {
		return nil, err
	}
	res := &WriteResult{}
	for attempt := 0; ; attempt++ {
		base, cur, parsed := sd.base, sd.doc, sd.parsed
		if attempt > 0 { // another writer got in between: read again
			if base, cur, err = c.store.CurrentDocument(ctx); err != nil {
				return nil, err
			}
			parsed = func() (*store.StoredState, error) { return store.ParseStored(cur) }
		}
		if err := o.stale(base); err != nil {
			return nil, err
		}
		if base != 0 && bytes.Equal(cur, enc) {
			res.Revision = base
			break
		}
		was, err := parsed()
		if err != nil {
			return nil, err
		}
		changes, prevDelta, err := was.ChangesTo(encServices, doc)
		if err != nil {
			return nil, err
		}
		rev, changed, err := c.store.CommitDocument(ctx, base, enc, prevDelta, a.Name, a.Via, label+": "+ipvsmgr.Summary(changes))
		var stale *store.StaleError
		if errors.As(err, &stale) && attempt < 50 {
			continue
		}
		if err != nil {
			return nil, err
		}
		res.Revision, res.Changed = rev, changed
		c.w.replaced(rev, doc, encServices)
		if changed {
			c.revisionStored(a, rev, label+": "+ipvsmgr.Summary(changes))
		}
		break
	}
	return c.afterCommit(ctx, res, desired, o, apply, nil)
}

// Write makes edits as one change of the stored desired state (one
// revision, retried on a concurrent write), refuses a result that does not
// validate, then makes the kernel match the stored state unless NoApply.
// Each edit is audited under its own action, all with the one outcome.
// With o.Draft the edits are staged in a's draft instead, with
// o.IntoOpenDraft when a has one (drafts.go).
func (c *Core) Write(ctx context.Context, a Actor, o WriteOptions, edits ...Edit) (res *WriteResult, err error) {
	if len(edits) == 0 {
		return nil, errorf(CodeBadInput, "no change given")
	}
	if o.Draft || o.IntoOpenDraft {
		res, staged, err := c.stage(ctx, a, edits, !o.Draft)
		if staged || err != nil {
			return res, err
		}
	}
	var summary string
	defer func() {
		for _, e := range edits {
			c.audit(ctx, a, e.Action, e.Target, res, err, summary)
		}
	}()
	for _, e := range edits {
		if err := allow(a, e.Action, e.Role); err != nil {
			return nil, err
		}
	}
	if err := c.refuseOnBackup(a); err != nil {
		return nil, err
	}
	change := batch(edits)
	apply, release, err := c.rt.BeginWrite(ctx, o)
	if err != nil {
		return nil, err
	}
	defer release()
	var desired *ipvsmgr.Desired
	var only []ipvsmgr.ServiceKey
	res, desired, only, summary, err = c.w.update(ctx, a, o, change)
	if err != nil {
		return nil, err
	}
	return c.afterCommit(ctx, res, desired, o, apply, only)
}

// afterCommit has the runtime make the kernel match a new revision; only
// names the services the change touched (nil: any may have changed).
func (c *Core) afterCommit(ctx context.Context, res *WriteResult, desired *ipvsmgr.Desired, o WriteOptions, apply ApplyFunc, only []ipvsmgr.ServiceKey) (*WriteResult, error) {
	if err := apply(ctx, res, desired, o, only); err != nil {
		return res, err
	}
	return res, nil
}

// withoutDaemon is desired for a reconcile in a process without the daemon:
// no checks run here, so checked servers are in as configured and only an
// operator's forced health applies (the daemon, once it runs, takes down
// servers out again at its first results).
func withoutDaemon(d *ipvsmgr.Desired) *ipvsmgr.Desired {
	if d.Health != nil {
		return d
	}
	cp := *d
	cp.Health = &ipvsmgr.HealthView{NoChecks: true}
	return &cp
}

// reconcileWaiting makes the kernel match desired, waiting for drains unless told not to.
func reconcileWaiting(ctx context.Context, rec *ipvsmgr.Reconciler, desired *ipvsmgr.Desired, o WriteOptions) (*ipvsmgr.Result, error) {
	return WaitDrains(ctx, o, func(bool) (*ipvsmgr.Result, error) { return rec.Reconcile(ctx, desired) })
}

// WaitDrains reconciles (first true the first time), then, unless told not
// to wait, again every second while real servers drain, adding up what the
// reconciles did.
func WaitDrains(ctx context.Context, o WriteOptions, reconcile func(first bool) (*ipvsmgr.Result, error)) (*ipvsmgr.Result, error) {
	res, err := reconcile(true)
	if err != nil {
		return nil, err
	}
	total := *res
	for !o.NoWait && len(res.Retiring) > 0 && ctx.Err() == nil {
		if o.Progress != nil {
			o.Progress(res.Retiring)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		if res, err = reconcile(false); err != nil {
			return nil, err
		}
		total.Applied = append(total.Applied, res.Applied...)
		total.Changes = append(total.Changes, res.Changes...)
		total.Failures = append(total.Failures, res.Failures...)
		total.Retiring = res.Retiring
	}
	return &total, nil
}

func changeCounts(ops []ipvsmgr.Op) string {
	var n [ipvsmgr.OpSetTimeouts + 1]int
	for _, op := range ops {
		n[op.Kind]++
	}
	return fmt.Sprintf("services: %d added, %d edited, %d deleted; real servers: %d added, %d edited, %d deleted",
		n[ipvsmgr.OpAddService], n[ipvsmgr.OpEditService], n[ipvsmgr.OpDelService], n[ipvsmgr.OpAddDest], n[ipvsmgr.OpEditDest], n[ipvsmgr.OpDelDest])
}

// audit records a write: who, through what, from where, what it changed and
// the revision it made, or why it failed. A record that cannot be written
// is logged; the write itself stands.
func (c *Core) audit(ctx context.Context, a Actor, action, target string, res *WriteResult, err error, detail string) {
	e := store.AuditEntry{Actor: a.Name, Via: a.Via, ClientAddr: a.Addr, Action: action, Target: target,
		Outcome: store.OutcomeSuccess, Detail: detail}
	if res != nil && res.Changed {
		rev := res.Revision
		e.Revision = &rev
	}
	if err != nil {
		e.Outcome, e.Detail = store.OutcomeFailure, err.Error()
	} else if res != nil && len(res.Failures) > 0 {
		e.Detail = strings.TrimPrefix(fmt.Sprintf("%s; %d kernel changes failed, first: %s: %s", detail, len(res.Failures), res.Failures[0].Change, res.Failures[0].Err), "; ")
	}
	var werr error
	if e.Revision == nil {
		// What made no revision (a check run now, a refused or repeated
		// request) folds into one row per actor, subject and outcome
		// within the window, with a count: repeats cannot flood the audit.
		_, werr = c.store.WriteAuditFold(context.WithoutCancel(ctx), e, auth.AuditRepeatWindow)
	} else {
		_, werr = c.store.WriteAudit(context.WithoutCancel(ctx), e)
	}
	if werr != nil {
		c.log.Error("audit record lost", "action", action, "target", target, "actor", a.Name, "err", werr)
	}
}
