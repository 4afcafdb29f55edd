// Package replication follows the other director's desired state: a backup
// takes the master's every change; after a split (both changed it) the newer
// change wins on both, and the conflict is logged, audited and shown in
// status. A follower of N (node set --replication follower) takes the
// source's every revision, and tells the source with each poll what it has
// (the source's status shows it: Core.FollowerPolled). The redundancy
// runner starts and stops it as the node settings say (Start, Stop).
//
// The room's boundary: it writes through the core's verbs (Core.Apply as a
// replicated author) like every other entry point, and reads the store
// only for the revision heads and the synced hash. The peer's side of it
// (Core.WaitHead, the long poll of GET /api/v1/state, the caller's client
// certificate checked in server/httpd before its token) is a core read.
package replication
