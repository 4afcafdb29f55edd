// Package server is ipvsctl's core and daemon: one Core whose methods are
// every change and every read the CLI, the API and the panel make, the store
// under it, and the daemon that keeps the kernel matching the stored state.
package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/tune"
	"github.com/ipvsctl/ipvsctl/server/auth"
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
	// Draft stages a Write's edits in the actor's draft (StageEdits)
	// instead: nothing is stored as a revision, nothing reaches the kernel.
	Draft bool
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

	shared *sharedKernel // the daemon's kernel, reconciler and snapshot; nil in a CLI
	red    *redState     // the director's VRRP role (redundancy.go)
	bgp    bgpState      // the BGP runner's status (bgp.go)

	writeMu sync.Mutex // the daemon's writes, one at a time, on cur
	cur     *current   // the daemon's copy of the current state

	rsSSH    RealServerSSH // how real servers are reached (realserver.go)
	identity string        // this director's certificate file (node.go)
	// resultsGen counts the changes of the stored real-server results: this
	// core's saves, and in the daemon another process's (noticeResults).
	resultsGen atomic.Int64
	accounts   *auth.Auth    // users and tokens (core_users.go)
	followers  followerTable // the directors following this one (followers.go)
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
}

// New returns a Core over a store.
func New(cfg Config) *Core {
	c := &Core{store: cfg.Store, open: cfg.OpenKernel, log: cfg.Log, lockPath: cfg.LockPath, now: time.Now, red: newRedState(),
		rsSSH: cfg.RealServerSSH, tuneHost: cfg.TuneHost, identity: cfg.IdentityCert}
	if c.open == nil {
		c.open = OpenHostKernel
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.accounts = newAccounts(cfg, c)
	return c
}

// State returns the stored desired state and its revision: in the daemon,
// a copy of the one it holds (no decoding of the document per request).
func (c *Core) State(ctx context.Context) (*ipvsmgr.State, int64, error) {
	if c.shared == nil {
		return c.store.Current(ctx)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	cur, err := c.loadCurrent(ctx)
	if err != nil {
		return nil, 0, err
	}
	st := *cur.st
	st.Services = slices.Clone(cur.st.Services)
	for i := range st.Services {
		s := &st.Services[i]
		s.Servers, s.Match, s.SchedulerFlags = slices.Clone(s.Servers), slices.Clone(s.Match), slices.Clone(s.SchedulerFlags)
	}
	st.Imported = slices.Clone(cur.st.Imported)
	return &st, cur.rev, nil
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
	lock, wait, err := c.beginReconcile(ctx, o)
	if err != nil {
		return nil, err
	}
	defer lock.unlock()
	stored := c.readStored(ctx)
	st, err := ipvsmgr.DecodeState(doc)
	if err != nil {
		return nil, err
	}
	desired, err := ipvsmgr.Compile(st)
	if err != nil {
		return nil, err
	}
	return c.replace(ctx, a, label, st, desired, o, wait, stored)
}

// ApplyState is Apply for a document already decoded (an import).
func (c *Core) ApplyState(ctx context.Context, a Actor, st *ipvsmgr.State, label string, o WriteOptions) (res *WriteResult, err error) {
	return c.applyState(ctx, a, "apply", st, label, o)
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
	lock, wait, err := c.beginReconcile(ctx, o)
	if err != nil {
		return nil, err
	}
	defer lock.unlock()
	return c.replace(ctx, a, label, st, desired, o, wait, c.readStored(ctx))
}

// beginReconcile takes the kernel lock and starts reading the kernel's table
// (unless NoApply), so that the read overlaps with decoding and storing.
func (c *Core) beginReconcile(ctx context.Context, o WriteOptions) (*kernelLock, func() (*KernelConn, error), error) {
	if o.NoApply {
		return nil, nil, nil
	}
	if c.shared != nil {
		return nil, nil, nil // the daemon's reconcile reads under its own lock
	}
	var lock *kernelLock
	if c.lockPath != "" {
		var err error
		if lock, err = lockKernel(ctx, c.lockPath, 30*time.Second); err != nil {
			return nil, nil, err
		}
	}
	return lock, prefetch(ctx, c.open), nil
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
	wait func() (*KernelConn, error), stored func() (*storedDoc, error)) (*WriteResult, error) {
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
		if c.shared != nil {
			c.writeMu.Lock()
			if c.cur == nil || c.cur.rev < rev {
				c.cur = &current{rev: rev, st: doc, enc: encServices}
			}
			c.writeMu.Unlock()
		}
		break
	}
	return c.afterCommit(ctx, res, desired, o, wait, nil)
}

// Write makes edits as one change of the stored desired state (one
// revision, retried on a concurrent write), refuses a result that does not
// validate, then makes the kernel match the stored state unless NoApply.
// Each edit is audited under its own action, all with the one outcome.
// With o.Draft the edits are staged in a's draft instead (StageEdits).
func (c *Core) Write(ctx context.Context, a Actor, o WriteOptions, edits ...Edit) (res *WriteResult, err error) {
	if len(edits) == 0 {
		return nil, errorf(CodeBadInput, "no change given")
	}
	if o.Draft {
		return c.stage(ctx, a, edits)
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
	lock, wait, err := c.beginReconcile(ctx, o)
	if err != nil {
		return nil, err
	}
	defer lock.unlock()
	var desired *ipvsmgr.Desired
	if c.shared != nil {
		var only []ipvsmgr.ServiceKey
		res, desired, only, summary, err = c.updateCurrent(ctx, a, o, change)
		if err != nil {
			return nil, err
		}
		return c.afterCommit(ctx, res, desired, o, wait, only)
	}
	res = &WriteResult{}
	res.Revision, res.Changed, err = c.store.Update(ctx, a.Name, a.Via, func(cur *ipvsmgr.State, base int64) (string, error) {
		if err := o.stale(base); err != nil {
			return "", err
		}
		ed, err := change(cur)
		if summary = ed.summary; err != nil {
			return "", err
		}
		if desired, err = ipvsmgr.Compile(cur); err != nil {
			return "", err
		}
		return summary, nil
	})
	if err != nil {
		return nil, err
	}
	return c.afterCommit(ctx, res, desired, o, wait, nil)
}

// afterCommit tells the daemon of a new revision and reconciles; only
// names the services the change touched (nil: any may have changed).
func (c *Core) afterCommit(ctx context.Context, res *WriteResult, desired *ipvsmgr.Desired, o WriteOptions, wait func() (*KernelConn, error), only []ipvsmgr.ServiceKey) (*WriteResult, error) {
	if c.shared != nil {
		c.shared.offer(res.Revision, desired, !o.NoApply)
	}
	if o.NoApply {
		return res, nil
	}
	if c.shared != nil {
		got, err := c.shared.reconcileWaiting(ctx, o, only)
		if err != nil {
			res.Failures = append(res.Failures, ipvsmgr.Failure{Service: "kernel", Change: "reconcile", Err: err.Error()})
			return res, nil
		}
		res.Result, res.Applied, res.Counts = *got, true, changeCounts(got.Applied)
		return res, nil
	}
	kc, err := wait()
	if err != nil {
		return res, err
	}
	defer kc.Close()
	desired = withoutDaemon(c.roleOverlay(desired)) // without the daemon: no VRRP (no VIPs on a redundant director), no checks
	got, err := reconcileWaiting(ctx, kc.reconciler(c.store, c.log), desired, o)
	if err != nil {
		return res, err
	}
	res.Result, res.Applied, res.Counts = *got, true, changeCounts(got.Applied)
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
	return waitDrains(ctx, o, func(bool) (*ipvsmgr.Result, error) { return rec.Reconcile(ctx, desired) })
}

// waitDrains reconciles (first true the first time), then, unless told not
// to wait, again every second while real servers drain, adding up what the
// reconciles did.
func waitDrains(ctx context.Context, o WriteOptions, reconcile func(first bool) (*ipvsmgr.Result, error)) (*ipvsmgr.Result, error) {
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
	if _, werr := c.store.WriteAudit(context.WithoutCancel(ctx), e); werr != nil {
		c.log.Error("audit record lost", "action", action, "target", target, "actor", a.Name, "err", werr)
	}
}
