package server

import (
	"strings"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/vrrp"
)

// ReplicatedAuthor starts the author of every revision copied from the
// peer: "replication from 198.18.0.2". No user name has a space, so no user
// can make one.
const ReplicatedAuthor = "replication from "

// RedundancyStatus is what this director's part in a redundant pair is doing.
type RedundancyStatus struct {
	// Role is master, backup, fault or initialize (per family, the most
	// senior: master over fault over backup); Forced when node set --role
	// chose it.
	Role     string `json:"role"`
	Forced   bool   `json:"forced,omitempty"`
	Fault    string `json:"fault,omitempty"`
	Priority int    `json:"priority"`
	VRID     int    `json:"vrid"`
	// Interface carries the adverts.
	Interface string `json:"interface"`
	// Master is the current master's address (this director's own when it
	// is master), MasterPriority its priority.
	Master         string `json:"master,omitempty"`
	MasterPriority int    `json:"master_priority,omitempty"`
	// LastAdvertAge is how long ago the last advert from the master came
	// (absent before the first, and on the master itself).
	LastAdvertAge *float64 `json:"last_advert_age_seconds,omitempty"`
	// VIPs are the addresses the pair carries; Families each VRRP instance
	// (one per address family that has VIPs).
	VIPs        []string               `json:"vips"`
	Families    []FamilyStatus         `json:"families"`
	Transitions []RedundancyTransition `json:"transitions"`
	// TransitionCounts counts every transition since the daemon started, by the state entered.
	TransitionCounts map[string]int     `json:"transition_counts"`
	SyncDaemon       SyncDaemonStatus   `json:"sync_daemon"`
	Replication      *ReplicationStatus `json:"replication,omitempty"`
	// Auth says how the adverts are authenticated ("none", or the
	// HMAC's mode, keys and window); AuthError what is wrong with the key
	// files settings.redundancy.auth names.
	Auth      string `json:"auth,omitempty"`
	AuthError string `json:"auth_error,omitempty"`
}

// FamilyStatus is one VRRP instance.
type FamilyStatus struct {
	Family     string `json:"family"` // ipv4, ipv6
	State      string `json:"state"`
	Master     string `json:"master,omitempty"`
	SendErrors int    `json:"send_errors,omitempty"`
	// Auth is how this instance's adverts are authenticated; Dropped
	// counts the packets it refused, by reason (bad_ttl, not_peer,
	// other_vrid, malformed, auth_missing, auth_bad_hmac,
	// auth_unknown_key, auth_malformed, auth_stale, auth_replay).
	Auth    string            `json:"auth,omitempty"`
	Dropped map[string]uint64 `json:"dropped_adverts,omitempty"`
	// PreemptWait is what this backup's due preemption of a master of
	// lower priority waits for (the sync daemon catching up; absent when
	// none waits).
	PreemptWait string `json:"preempt_wait,omitempty"`
}

// RedundancyTransition is one change of role with its reason.
type RedundancyTransition struct {
	At     time.Time `json:"at"`
	Family string    `json:"family"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason"`
}

// SyncDaemonStatus is the IPVS connection sync daemon as the role wants it
// and as the kernel runs it.
type SyncDaemonStatus struct {
	Enabled bool     `json:"enabled"`
	Want    string   `json:"want,omitempty"` // master or backup
	Running []string `json:"running"`
	Error   string   `json:"error,omitempty"`
	// ActiveConnections are the active connections in this director's
	// table (summed over its real servers, as the last poll read them):
	// what a returning director's sync daemon must have before it preempts
	// this one (preempt_sync_wait). Absent before the first poll.
	ActiveConnections *int64 `json:"active_connections,omitempty"`
}

// ReplicationStatus is how this director follows its peer's desired state.
type ReplicationStatus struct {
	Peer      string `json:"peer"`
	Connected bool   `json:"connected"`
	InSync    bool   `json:"in_sync"`
	// PeerRevision is the peer's current revision as last seen.
	PeerRevision int64 `json:"peer_revision"`
	// LagSeconds is 0 while in sync with the peer, else how long since it
	// last was; LastCopySeconds is how long the last change took to arrive.
	LagSeconds      float64    `json:"lag_seconds"`
	LastCopySeconds float64    `json:"last_copy_seconds,omitempty"`
	LastCopy        *time.Time `json:"last_copy,omitempty"`
	Error           string     `json:"error,omitempty"`
	// Failures counts the polls that failed and the answers refused since
	// replication started (Error says why the last one was).
	Failures  int64      `json:"failures"`
	Conflicts []Conflict `json:"conflicts"`
}

// Conflict is a split's end: both directors had changed the desired state,
// and the newer change won. The loser's revision stays in its history.
type Conflict struct {
	At       time.Time `json:"at"`
	Winner   string    `json:"winner"`   // which director's change was kept
	Kept     string    `json:"kept"`     // its revision: "peer revision 9 by alice at ..."
	Lost     string    `json:"lost"`     // the diverging one: "local revision 7 by bob at ..."
	Revision int64     `json:"revision"` // the revision here that made the winner current (0 if none was needed)
}

// redState is what the core knows of the director's role: the reconcile
// lays it over the desired state, and writes are refused on a backup.
type redState struct {
	mu     sync.Mutex
	active bool                // a runner manages VRRP (the daemon with settings.redundancy)
	roles  map[bool]vrrp.State // by family: true for IPv4
	forced string              // node set --role master|backup
	master string              // the master's address, as VRRP last heard
	peer   string              // the peer's URL, for the refusal's message
	status func() *RedundancyStatus

	node      chan struct{} // the node settings changed
	pollsDone chan struct{} // closed when the daemon stops: long polls end
	pollsOnce sync.Once
}

func newRedState() *redState {
	return &redState{roles: map[bool]vrrp.State{}, node: make(chan struct{}, 1), pollsDone: make(chan struct{})}
}

func (r *redState) nodeChanged() {
	select {
	case r.node <- struct{}{}:
	default:
	}
}

func (r *redState) setRole(v4 bool, s vrrp.State, master string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roles[v4] = s
	if master != "" {
		r.master = master
	}
}

// isMaster says whether the VIPs of a family belong on this director.
func (r *redState) isMaster(v4 bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.roles[v4] == vrrp.Master
}

// backup says whether this director is a backup (no family master, one
// backup), and who the master is.
func (r *redState) backup() (bool, string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.active {
		return false, "", ""
	}
	if r.forced == "backup" {
		return true, r.master, r.peer
	}
	any := false
	for _, s := range r.roles {
		if s == vrrp.Master {
			return false, "", ""
		}
		any = any || s == vrrp.Backup
	}
	return any, r.master, r.peer
}

// roleOverlay is the desired state as this director's role allows: with
// settings.redundancy, only the families it is master of keep their VIPs
// (a backup, a director in fault, and a CLI or boot restore without the
// daemon's VRRP carry none, so the reconciler removes what it added); the
// others stand by, for the ledger's intent.
func (c *Core) roleOverlay(d *ipvsmgr.Desired) *ipvsmgr.Desired {
	if d == nil || d.Settings.Redundancy == nil || len(d.VIPs) == 0 {
		return d
	}
	cp := *d
	cp.VIPs, cp.Standby = nil, nil
	for _, v := range d.VIPs {
		if c.red.isMaster(v.Addr.Unmap().Is4()) {
			cp.VIPs = append(cp.VIPs, v)
		} else {
			cp.Standby = append(cp.Standby, v)
		}
	}
	return &cp
}

// refuseOnBackup refuses a change on a backup: it follows the master.
func (c *Core) refuseOnBackup(a Actor) error {
	if strings.HasPrefix(a.Name, ReplicatedAuthor) {
		return nil
	}
	if err := c.refuseOnFollower(a); err != nil {
		return err
	}
	backup, master, peer := c.red.backup()
	if !backup {
		return nil
	}
	if s := c.redundancyStatus(); s != nil && s.Master != "" {
		master = s.Master
	}
	where := orDefault(master, "the other director")
	if peer != "" {
		where += " (" + peer + ")"
	}
	return errorf(CodeBackup, "this director is the backup: make the change on the master, %s; it reaches this one within a second", where)
}

func (c *Core) redundancyStatus() *RedundancyStatus {
	c.red.mu.Lock()
	f := c.red.status
	c.red.mu.Unlock()
	if f == nil {
		return nil
	}
	return f()
}

// RoleState is the director's VRRP role as the redundancy runner tells the
// core of it.
type RoleState redState

// SetStatus makes f what RedundancyStatus answers (nil: none).
func (r *RoleState) SetStatus(f func() *RedundancyStatus) {
	r.mu.Lock()
	r.status = f
	r.mu.Unlock()
}

// NodeChanged is poked when the node settings change.
func (r *RoleState) NodeChanged() <-chan struct{} { return r.node }

// SetActive says whether a runner manages VRRP (settings.redundancy), the
// role node set --role forces ("" for none) and the peer's URL.
func (r *RoleState) SetActive(active bool, forced, peer string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active, r.forced = active, forced
	if active {
		r.peer = peer
	}
}

// SetRole is a family's VRRP state (true: IPv4), and the master's address
// when known.
func (r *RoleState) SetRole(v4 bool, s vrrp.State, master string) {
	(*redState)(r).setRole(v4, s, master)
}

// ClearRoles forgets every family's state (VRRP stopped).
func (r *RoleState) ClearRoles() {
	r.mu.Lock()
	clear(r.roles)
	r.mu.Unlock()
}

// Roles is the forced role and a copy of each family's state.
func (r *RoleState) Roles() (forced string, roles map[bool]vrrp.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	roles = make(map[bool]vrrp.State, len(r.roles))
	for k, v := range r.roles {
		roles[k] = v
	}
	return r.forced, roles
}

// Backup says whether this director is a backup, and who the master is and
// the peer's URL.
func (r *RoleState) Backup() (bool, string, string) { return (*redState)(r).backup() }
