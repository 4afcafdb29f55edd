package server

import (
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// The records the core's reads hand out, named here so that callers (the
// CLI, the client, handlers) speak of the core and never import the store:
// only the core and the composition roots that open a database do.
type (
	AuditFilter = store.AuditFilter
	AuditEntry  = store.AuditEntry
	Token       = store.Token
	Retention   = store.Retention
	User        = store.User
	Revision    = store.Revision
	Head        = store.Head
	ChartRow    = store.ChartRow
	// StaleError is a write refused because the state moved past its base.
	StaleError = store.StaleError
)

// ChartChunk is how many chart series one stored row holds.
const ChartChunk = store.ChartChunk

// The audit's outcomes (AuditEntry.Outcome).
const (
	OutcomeSuccess = store.OutcomeSuccess
	OutcomeFailure = store.OutcomeFailure
)

// EncodeState is a document in the stored form (what export and the
// revisions hold).
func EncodeState(st *ipvsmgr.State) ([]byte, error) { return store.Encode(st) }

// DocumentHash is the content hash a revision's document is known by (the
// Content-Hash a peer serves).
func DocumentHash(doc []byte) string { return store.DocumentHash(doc) }

// ErrNotFound and ErrExists are what a read or a create of a named record
// (a user, a token) wraps when it is missing or taken.
var (
	ErrNotFound = store.ErrNotFound
	ErrExists   = store.ErrExists
)
