package server

import "github.com/ipvsctl/ipvsctl/ipvsmgr"

// DaemonSide is the core as the daemon (server/daemon) holds it: the hooks
// through which the process that owns the kernel attaches its runtime and
// tells the core what only it knows (the checker's health, BGP's status, the
// alerts' deliveries). No entry point needs them, so they are not on *Core.
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
