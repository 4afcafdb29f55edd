package server

import "github.com/ipvsctl/ipvsctl/server/store"

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
)

// DocumentHash is the content hash a revision's document is known by (the
// Content-Hash a peer serves).
func DocumentHash(doc []byte) string { return store.DocumentHash(doc) }

// ErrNotFound and ErrExists are what a read or a create of a named record
// (a user, a token) wraps when it is missing or taken.
var (
	ErrNotFound = store.ErrNotFound
	ErrExists   = store.ErrExists
)
