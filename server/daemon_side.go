package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// DaemonSide is the core as the daemon's process holds it (server/daemon,
// its rooms server/redundancy, server/replication and server/metrics, and
// `ipvsctl serve`): the hooks through which the process that owns the kernel
// attaches its runtime, tells the core what only it knows (the checker's
// health, BGP's status, the VRRP role, the alerts' deliveries) and reads
// what only it uses. No entry point needs them, so they are not on *Core.
type DaemonSide struct{ c *Core }

// DaemonSideOf is c's daemon side.
func DaemonSideOf(c *Core) *DaemonSide { return &DaemonSide{c: c} }

// Attach makes rt the core's runtime (a daemon attaching): the core then
// also keeps its copy of the current state, which a write starts from
// instead of decoding the whole document (a process that lives long enough
// for it to pay). Call it before the core serves anything.
func (s *DaemonSide) Attach(rt LiveRuntime) {
	s.c.rt, s.c.live = rt, rt
	s.c.w = &cachedWriter{c: s.c}
}

// OpenKernel opens the kernel as the core was configured to, for the
// daemon's session. A handler never opens the kernel (STYLE's wall): it
// calls the core's verbs and reads.
func (s *DaemonSide) OpenKernel() (*KernelConn, error) { return s.c.open() }

// RoleOverlay is the desired state as this director's role allows: with
// settings.redundancy, only the families it is master of keep their VIPs.
func (s *DaemonSide) RoleOverlay(d *ipvsmgr.Desired) *ipvsmgr.Desired { return s.c.roleOverlay(d) }

// SetChecker makes f the source of Core.CheckerStatus (the daemon's watchdog).
func (s *DaemonSide) SetChecker(f func() *CheckerStatus) { s.c.checker.f.Store(&f) }

// SetAlertSource is how the daemon's alert sender tells the core where to
// read its deliveries (nil: none is running).
func (s *DaemonSide) SetAlertSource(f func() []AlertDelivery) { s.c.alerts.Store(&f) }

// BGPWake is poked when the node settings of the BGP speaker change.
func (s *DaemonSide) BGPWake() <-chan struct{} { return s.c.bgp.wakeC() }

// SetBGPStatus is the BGP runner's latest status (nil outside BGP mode).
func (s *DaemonSide) SetBGPStatus(st *BGPStatus) { s.c.bgp.status.Store(st) }

// ResultsChanged tells the core that another process stored real-server
// results (the daemon noticed): views keyed on them are made again.
func (s *DaemonSide) ResultsChanged() { s.c.resultsGen.Add(1) }

// Log is the core's logger.
func (s *DaemonSide) Log() *slog.Logger { return s.c.log }

// Role is the core's knowledge of the director's VRRP role, which the
// daemon's redundancy runner keeps (and replication reads).
func (s *DaemonSide) Role() *RoleState { return (*RoleState)(s.c.red) }

// RedundancyStatus is what the daemon's VRRP and replication are doing (nil
// without a daemon, or when neither is configured), for the metrics.
func (s *DaemonSide) RedundancyStatus() *RedundancyStatus { return s.c.redundancyStatus() }

// KernelReads is how many times the daemon has read the kernel's whole
// table (0 without a daemon), for the metrics.
func (s *DaemonSide) KernelReads() int64 { return s.c.counters().KernelReads }

// Fingerprint is the fingerprint of the certificate this process serves
// (its --tls-cert, else the self-signed one), "" when it cannot be read:
// what a daemon tells the directors it reports to.
func (s *DaemonSide) Fingerprint() string { return s.c.fingerprint() }

// FingerprintReports are the reports the directors following this one
// sent, each with its age (stale past bgp.StaleAfter).
func (s *DaemonSide) FingerprintReports() []bgp.DirectorFingerprints { return s.c.fingerprintReports() }

// RecordIdentity stores the certificate this daemon serves, so that node
// show without the daemon prints the fingerprint the peers see.
func (s *DaemonSide) RecordIdentity(ctx context.Context) error { return s.c.recordIdentity(ctx) }

// RunRetention prunes the records that grow without a change being made
// (the audit, the health transitions, ended sessions) as r says, at once
// and then every period, until ctx ends.
func (s *DaemonSide) RunRetention(ctx context.Context, r store.Retention, every time.Duration) {
	s.c.runRetention(ctx, r, every)
}

// EndLongPolls answers every waiting GET /api/v1/state?after=N at once: the
// daemon is stopping, and its HTTP shutdown waits for requests in flight.
func (s *DaemonSide) EndLongPolls() { s.c.red.pollsOnce.Do(func() { close(s.c.red.pollsDone) }) }
