// Package replication follows the other director's desired state: a backup
// takes the master's every change; after a split (both changed it) the newer
// change wins on both, and the conflict is logged, audited and shown in
// status. The redundancy runner starts and stops it as the node settings
// say (Start, Stop).
//
// The room's boundary: it writes through the core's verbs (Core.Apply as a
// replicated author) like every other entry point, and reads the store
// only for the revision heads and the synced hash. The peer's side of it
// (Core.WaitHead, the long poll of GET /api/v1/state) is a core read.
package replication
