// Package redundancy runs a director's part in a redundant pair: VRRP (one
// instance per address family that has VIPs), the advert authentication,
// the IPVS connection sync daemon switched with the role, and the
// replication of the peer's desired state (package replication), started
// and stopped as the node settings say.
//
// The room's boundary: it is a runner of the daemon (Attach), reaching the
// kernel only through the daemon's Session. What the core must know of the
// role (refuse writes on a backup, lay the role over the desired state, the
// status types readers share) stays in the core (server.RoleState,
// server.RedundancyStatus); this package tells the core through
// Core.Role().
package redundancy
