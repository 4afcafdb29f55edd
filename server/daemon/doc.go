// Package daemon is ipvsctl serve's long-lived half: the loop that keeps the
// kernel matching the stored desired state, the one kernel session (its
// connection, reconciler, snapshot and plan cache: session.go), the health
// checks' wiring, and the BGP speaker.
//
// The room's boundary: the daemon imports the core (package server), never
// the reverse. It attaches to a Core as its server.Runtime (New), so the
// core's writes reconcile through the session and its reads use the
// snapshot; the core knows nothing else of it. Runners beside the loop (the
// VRRP runner, package redundancy) attach with AddRunner and see the
// session through Session, not its fields. The composition root
// (cmd/ipvsctl's serve, server/servertest) wires the rooms together.
package daemon
