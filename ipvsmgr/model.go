// Package ipvsmgr holds the desired-state model of an IPVS director, its
// validation, the pure diff between desired and kernel state, and the
// reconcile that applies that diff.
package ipvsmgr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// State is the desired state of a director: the document `ipvsctl apply`
// takes and the API serves at /api/v1/state.
type State struct {
	Settings Settings  `json:"settings"`
	Services []Service `json:"services"`
	// Imported keeps what an import found that has no equivalent in this
	// model yet (a Piranha send/expect, a keepalived checker block), so that
	// nothing is silently dropped and later features can take it up.
	Imported []ImportedKey `json:"imported,omitempty"`
}

// ImportedKey is one setting an import could not map.
type ImportedKey struct {
	Source string `json:"source"`          // format: lvs.cf, keepalived, ipvsadm
	Line   int    `json:"line"`            // where it was in the input
	Scope  string `json:"scope,omitempty"` // e.g. "virtual web", "virtual_server 198.18.0.1 80"
	Key    string `json:"key"`
	Value  string `json:"value"`
}

// Settings are director-wide.
type Settings struct {
	// Network is the default forwarding method: dr, nat or tun.
	Network string `json:"network,omitempty"`
	// IPVS connection timeouts in seconds; 0 leaves the kernel's value alone.
	TCPTimeout    int `json:"tcp_timeout"`
	TCPFinTimeout int `json:"tcpfin_timeout"`
	UDPTimeout    int `json:"udp_timeout"`
	// KeepForeignServices leaves kernel services that ipvsctl did not create
	// alone (hosts that also run docker or kube-proxy). By default ipvsctl owns
	// the whole IPVS table.
	KeepForeignServices bool `json:"keep_foreign_services,omitempty"`
	// RetireTimeout (seconds) bounds how long a removed real server keeps its
	// established connections at weight 0 before it is deleted (it is
	// retiring; a drained one stays). 0 means the default,
	// DefaultRetireTimeout. Read under its old name, drain_timeout, too.
	RetireTimeout int `json:"retire_timeout,omitempty"`
	// MaintenanceDir (ldirectord's maintenancedir) is a directory the
	// daemon reads every second: a file there named for a real server
	// (its address, or address:port) quiesces it in every service until
	// the file goes (maintenance.go).
	MaintenanceDir string `json:"maintenance_dir,omitempty"`
	// Redundancy makes this director one of a VRRP pair (or group); absent,
	// it runs alone and always carries its VIPs.
	Redundancy *Redundancy `json:"redundancy,omitempty"`
	// BGP, when set, makes this director one of N active ones that announce
	// the VIPs over BGP (bgpsettings.go).
	BGP *BGP `json:"bgp,omitempty"`
	// Alerts mail and post what the director does (alerts.go).
	Alerts *Alerts `json:"alerts,omitempty"`
}

// Redundancy is the VRRPv3 virtual router the directors share: the same on
// each (it is in the replicated document). Each director's own priority is
// node-local, outside the document. Times are in seconds, fractions allowed
// down to 0.01. The VIPs carried are the services' addresses that have an
// interface.
type Redundancy struct {
	VRID      int    `json:"vrid"`
	Interface string `json:"interface"`
	// AdvertInterval between adverts; 0 means 1 s.
	AdvertInterval float64 `json:"advert_interval,omitempty"`
	// UnicastPeers, when set, are the directors' addresses: adverts go to
	// each by unicast (a director skips its own address) instead of
	// multicast (keepalived's unicast_peer). Read under its old name, peers,
	// too (settings.bgp.peers are routers).
	UnicastPeers []string `json:"unicast_peers,omitempty"`
	// Preempt lets a director of higher priority take over from a lower
	// one (default true); PreemptDelay holds it back that long.
	Preempt      *bool   `json:"preempt,omitempty"`
	PreemptDelay float64 `json:"preempt_delay,omitempty"`
	// SyncDaemon runs the kernel's connection sync daemon (master on the
	// master, backup on the backup) on SyncInterface (default Interface)
	// with SyncID (default 0), so that connections survive a failover.
	SyncDaemon bool `json:"sync_daemon,omitempty"`
	// PreemptSyncWait: with the sync daemon, a director that would preempt
	// its master waits first (after PreemptDelay) until its sync daemon has
	// the master's active connections, for at most this many seconds
	// (default 30; 0: no wait).
	PreemptSyncWait *float64 `json:"preempt_sync_wait,omitempty"`
	SyncInterface   string   `json:"sync_interface,omitempty"`
	SyncID          int      `json:"sync_id,omitempty"`
	// TrackInterfaces put the director in fault while one is down.
	TrackInterfaces []string `json:"track_interfaces,omitempty"`
	// GARPCount gratuitous ARPs / unsolicited NAs per VIP on becoming master
	// (default 5), and as many again GARPRepeatDelay later (default 5 s; 0
	// for no repeat).
	GARPCount       *int     `json:"garp_count,omitempty"`
	GARPRepeatDelay *float64 `json:"garp_repeat_delay,omitempty"`
	// Auth signs the adverts and refuses unsigned or forged ones
	// (keepalived 2.4's auth_hmac); absent, adverts are unauthenticated.
	Auth *RedundancyAuth `json:"auth,omitempty"`
	// Instance is the virtual router's name, as keepalived's vrrp_instance
	// has one: what Notify is told (default "VI_1", keepalived's sample's).
	Instance string `json:"instance,omitempty"`
	// VRRPNotify are the instance's programs: Notify is told INSTANCE, the
	// instance's name, the state and the priority.
	VRRPNotify
	// SMTPAlert (keepalived's smtp_alert in a vrrp_instance) mails each
	// change of state; unset, settings.alerts.smtp decides (SMTPAlerts).
	SMTPAlert *bool `json:"smtp_alert,omitempty"`
	// SyncGroup is keepalived's vrrp_sync_group around the instance: its
	// programs and mail, run after the instance's on each change.
	SyncGroup *SyncGroup `json:"sync_group,omitempty"`
}

// SyncGroup is keepalived's vrrp_sync_group. keepalived moves a sync
// group's instances together; ipvsctl's one instance already carries
// every VIP, on whichever interfaces the services say, so the group is
// only its name, its programs and its mail. NotifyMaster...NotifyStop
// run as the state is taken, after the instance's programs, and Notify
// after them with keepalived's arguments added: GROUP, the group's name,
// the state and 0 (keepalived passes no priority for a group).
type SyncGroup struct {
	Name string `json:"name"`
	// VRRPNotify are the group's programs: Notify is told GROUP, the
	// group's name, the state and 0.
	VRRPNotify
	// SMTPAlert (smtp_alert in the vrrp_sync_group) mails the group's
	// changes of state; unset, settings.alerts.smtp decides (ForVRRP).
	SMTPAlert *bool `json:"smtp_alert,omitempty"`
}

// VRRPNotify are the programs the daemon runs, as root, as a VRRP instance
// (or its sync group) changes state, with keepalived's calling convention:
// NotifyMaster, NotifyBackup, NotifyFault or NotifyStop (keepalived's
// notify_master...) as that state is taken, then Notify on every change
// with four arguments added: INSTANCE or GROUP, the name, the state
// (MASTER, BACKUP, FAULT, STOP) and the priority (0 for a group).
type VRRPNotify struct {
	// NotifyMaster (keepalived's notify_master) runs, as root, as the
	// state MASTER is taken.
	NotifyMaster Argv `json:"notify_master,omitempty"`
	// NotifyBackup (notify_backup) runs as the state BACKUP is taken.
	NotifyBackup Argv `json:"notify_backup,omitempty"`
	// NotifyFault (notify_fault) runs as the state FAULT is taken.
	NotifyFault Argv `json:"notify_fault,omitempty"`
	// NotifyStop (notify_stop) runs as VRRP stops (STOP).
	NotifyStop Argv `json:"notify_stop,omitempty"`
	// Notify runs after them on every change, with keepalived's four
	// arguments added: INSTANCE or GROUP, the name, the state (MASTER,
	// BACKUP, FAULT, STOP) and the priority (0 for a group).
	Notify Argv `json:"notify,omitempty"`
}

// NotifyProgram is one of VRRPNotify's programs with its keepalived keyword.
type NotifyProgram struct {
	Keyword string
	Argv    *Argv
}

// Programs are n's five programs in keepalived's order (unset ones too),
// each with its keyword.
func (n *VRRPNotify) Programs() []NotifyProgram {
	return []NotifyProgram{{"notify_master", &n.NotifyMaster}, {"notify_backup", &n.NotifyBackup},
		{"notify_fault", &n.NotifyFault}, {"notify_stop", &n.NotifyStop}, {"notify", &n.Notify}}
}

// DefaultInstance is the VRRP instance's name when the document gives none.
const DefaultInstance = "VI_1"

// RedundancyAuth is the adverts' HMAC-SHA256 authentication. The keys
// themselves are in files on each director (the same paths on both), never
// in the document, its history or the API.
type RedundancyAuth struct {
	// Keys are every key accepted, by id (1..255, the id goes in each
	// advert): two during a rotation.
	Keys []RedundancyKey `json:"keys"`
	// ActiveKey signs the adverts sent; 0 means the only key.
	ActiveKey int `json:"active_key,omitempty"`
	// Mode is enforce (the default: only valid signed adverts count),
	// permissive (sign, and accept unsigned ones too) or receive-only
	// (do not sign; check the signed ones that come): the steps of a
	// migration without a failover.
	Mode string `json:"mode,omitempty"`
	// AntiReplay is time (the default: a time stamp more than TimeWindow
	// seconds off the clock is refused; the clocks must agree) or
	// monotonic (strictly growing sequences only).
	AntiReplay string `json:"anti_replay,omitempty"`
	TimeWindow int    `json:"time_window,omitempty"`
}

// RedundancyKey names one key's file: 32..64 bytes, as text or as
// "hex:" and the bytes in hex (keepalived's format), mode 0600 or tighter.
type RedundancyKey struct {
	ID   int    `json:"id"`
	File string `json:"file"`
}

// Active is the id of the key that signs.
func (a *RedundancyAuth) Active() int {
	if a.ActiveKey == 0 && len(a.Keys) == 1 {
		return a.Keys[0].ID
	}
	return a.ActiveKey
}

// Defaults of the redundancy settings.
const (
	DefaultAdvertInterval  = time.Second
	DefaultGARPCount       = 5
	DefaultGARPRepeatDelay = 5 * time.Second
	DefaultPreemptSyncWait = 30 * time.Second
)

// centiseconds is s seconds in VRRP's unit, the centisecond.
func centiseconds(s float64) time.Duration {
	return time.Duration(math.Round(s*100)) * 10 * time.Millisecond
}

// Advert is the advert interval, the default when unset.
func (r *Redundancy) Advert() time.Duration {
	if r.AdvertInterval == 0 {
		return DefaultAdvertInterval
	}
	return centiseconds(r.AdvertInterval)
}

// PreemptOn is whether preemption is on (the default).
func (r *Redundancy) PreemptOn() bool { return r.Preempt == nil || *r.Preempt }

// Delay is the preempt delay.
func (r *Redundancy) Delay() time.Duration { return centiseconds(r.PreemptDelay) }

// SyncWait is how long a due preemption may wait for the sync daemon to
// catch up with the master's connections: 0 without the sync daemon or
// preemption, the default when unset.
func (r *Redundancy) SyncWait() time.Duration {
	switch {
	case !r.SyncDaemon || !r.PreemptOn():
		return 0
	case r.PreemptSyncWait == nil:
		return DefaultPreemptSyncWait
	}
	return centiseconds(*r.PreemptSyncWait)
}

// GARPs is how many announcements per VIP in a burst, and the delay of the
// repeat (0: none).
func (r *Redundancy) GARPs() (int, time.Duration) {
	n, d := DefaultGARPCount, DefaultGARPRepeatDelay
	if r.GARPCount != nil {
		n = *r.GARPCount
	}
	if r.GARPRepeatDelay != nil {
		d = centiseconds(*r.GARPRepeatDelay)
	}
	return n, d
}

// SyncDaemonInterface is where the connection sync daemon runs.
func (r *Redundancy) SyncDaemonInterface() string {
	if r.SyncInterface != "" {
		return r.SyncInterface
	}
	return r.Interface
}

// DefaultRetireTimeout is the retiring bound when settings.retire_timeout is 0.
const DefaultRetireTimeout = 60

// Service is a virtual service: protocol + address + port, or a firewall mark.
type Service struct {
	Name               string   `json:"name,omitempty"`
	Protocol           string   `json:"protocol,omitempty"`
	Address            string   `json:"address,omitempty"`
	Port               int      `json:"port,omitempty"`
	FWMark             uint32   `json:"fwmark,omitempty"`
	Match              []Match  `json:"match,omitempty"`
	Interface          string   `json:"interface,omitempty"`
	Scheduler          string   `json:"scheduler,omitempty"`
	SchedulerFlags     []string `json:"scheduler_flags,omitempty"`
	OnePacket          bool     `json:"one_packet,omitempty"`
	Persistence        int      `json:"persistence,omitempty"`
	PersistenceNetmask string   `json:"persistence_netmask,omitempty"`
	Forwarding         string   `json:"forwarding,omitempty"`
	Enabled            *bool    `json:"enabled,omitempty"`
	// Check is the health check its real servers inherit (each may override
	// fields of it); without one a server is always in, as configured.
	Check *Check `json:"check,omitempty"`
	// SorryServer is added to the service while fewer than Quorum (default 1)
	// of its real servers are healthy.
	SorryServer *SorryServer `json:"sorry_server,omitempty"`
	Quorum      int          `json:"quorum,omitempty"`
	// Hysteresis (keepalived's, in servers): once the sorry server is in,
	// it leaves when Quorum+Hysteresis servers are up; it comes in when
	// fewer than Quorum-Hysteresis are. Below Quorum.
	Hysteresis int `json:"hysteresis,omitempty"`
	// QuorumUp and QuorumDown (keepalived's quorum_up/quorum_down) are
	// programs and their arguments the daemon runs, as root, when the
	// service gains or loses its quorum (the sorry server's rule, with the
	// hysteresis): on the change only; at start-up only a service with a
	// sorry server that starts below its quorum runs QuorumDown, as
	// keepalived's "Starting with quorum down".
	QuorumUp   Argv `json:"quorum_up,omitempty"`
	QuorumDown Argv `json:"quorum_down,omitempty"`
	// SMTPAlert (keepalived's smtp_alert) mails the quorum lost and
	// regained; unset, settings.alerts.smtp decides (SMTPAlerts).
	SMTPAlert *bool `json:"smtp_alert,omitempty"`
	// Group names the set of services this one belongs to (keepalived's
	// virtual_server_group): its members share their settings and real
	// servers, and an export to keepalived writes them back as one group.
	Group   string   `json:"group,omitempty"`
	Servers []Server `json:"servers"`
}

// SorryServer is the real server that answers when too few are healthy.
type SorryServer struct {
	Address string `json:"address"`
	Port    int    `json:"port,omitempty"` // 0: the service's port
}

// Match selects the packets to a fwmark service's VIP that ipvsctl marks.
type Match struct {
	Protocol string `json:"protocol"`
	Ports    []int  `json:"ports"`
}

// Server is a real server of a virtual service.
type Server struct {
	Name       string `json:"name,omitempty"`
	Address    string `json:"address"`
	Port       int    `json:"port,omitempty"`
	Weight     *int   `json:"weight,omitempty"`
	Forwarding string `json:"forwarding,omitempty"`
	// Tunnel is a tun server's encapsulation: ipip (the default), gue
	// (UDP to TunnelPort) or gre; TunnelChecksum nocsum (default), csum,
	// or remcsum (gue only). Kernel 5.2 and later.
	Tunnel         string `json:"tunnel,omitempty"`
	TunnelPort     int    `json:"tunnel_port,omitempty"`
	TunnelChecksum string `json:"tunnel_checksum,omitempty"`
	UpperThreshold int    `json:"upper_threshold,omitempty"`
	LowerThreshold int    `json:"lower_threshold,omitempty"`
	Enabled        *bool  `json:"enabled,omitempty"`
	// Drained is the admin state drain (HAProxy's "drain", LVS's quiesce):
	// the kernel gets weight 0, so the scheduler sends it no new connection
	// while established ones go on; Weight stays the configured weight,
	// which enabling the server gives back.
	Drained bool `json:"drained,omitempty"`
	// Health forces the server up or down whatever its checks say (an
	// operator's decision, so it is in the document); "" or "auto" leaves it
	// to the checks.
	Health string `json:"health,omitempty"`
	// Check overrides fields of the service's check for this server.
	Check *Check `json:"check,omitempty"`
	// NotifyUp and NotifyDown (keepalived's notify_up/notify_down) are
	// programs the daemon runs, as root, when the server's checks find it
	// up (or back) and down.
	NotifyUp   Argv `json:"notify_up,omitempty"`
	NotifyDown Argv `json:"notify_down,omitempty"`
	// SMTPAlert (keepalived's smtp_alert) mails the server's up and down;
	// unset, settings.alerts.smtp decides (SMTPAlerts).
	SMTPAlert *bool `json:"smtp_alert,omitempty"`
}

// IsEnabled reports whether the service should be in the kernel (default true).
func (s *Service) IsEnabled() bool { return s.Enabled == nil || *s.Enabled }

// IsEnabled reports whether the server should be in the kernel (default true).
func (s *Server) IsEnabled() bool { return s.Enabled == nil || *s.Enabled }

// KernelWeight is the weight the kernel gets: 0 while drained, else the
// configured weight.
func (s *Server) KernelWeight() int {
	if s.Drained {
		return 0
	}
	return s.EffectiveWeight()
}

// AdminState is the server's admin state in HAProxy's words: ready, drain
// (weight 0 in the kernel) or maint (disabled: out of the kernel).
func (s *Server) AdminState() string {
	switch {
	case !s.IsEnabled():
		return "maint"
	case s.Drained:
		return "drain"
	}
	return "ready"
}

// EffectiveWeight is the configured weight with its default of 1.
func (s *Server) EffectiveWeight() int {
	if s.Weight == nil {
		return 1
	}
	return *s.Weight
}

// DecodeState reads a desired-state document. Unknown fields are an error,
// not silently dropped. It does not validate; call Validate.
func DecodeState(r io.Reader) (*State, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read state document: %w", err)
	}
	if st, ok := decodeFast(data); ok {
		ScrubImported(st.Imported)
		return st, nil
	}
	// The slow path also gives the exact diagnostic, with its line.
	st, err := decodeJSON(data)
	if err != nil {
		msg := "trailing data after the JSON object"
		if !errors.Is(err, errTrailingData) {
			msg = describeJSONError(data, err)
		}
		return nil, &ValidationError{Problems: []Problem{{Field: "document", Message: msg}}}
	}
	return st, nil
}

var errTrailingData = errors.New("trailing data after the JSON object")

// decodeJSON is DecodeState with encoding/json alone: what the fast decoder
// must agree with (FuzzDecodeFast), and where the diagnostics come from.
func decodeJSON(data []byte) (*State, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var doc stateDocument
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errTrailingData
	}
	ScrubImported(doc.State.Imported)
	return &doc.State, nil
}

// SchemaKey is the top-level key an editor puts in a document to name its
// JSON Schema (docs/state.schema.json): accepted and dropped, never stored.
const SchemaKey = "$schema"

// stateDocument is a document as it is read: the state, and the editor's
// "$schema" beside it (a string or null). Every other unknown key is still
// an error.
type stateDocument struct {
	Schema *string `json:"$schema"`
	State
}

// describeJSONError turns a decoder error into a message with the line.
func describeJSONError(data []byte, err error) string {
	var off int64 = -1
	switch e := err.(type) {
	case *json.SyntaxError:
		off = e.Offset
	case *json.UnmarshalTypeError:
		off = e.Offset
		// stateDocument embeds State: its fields are the document's own.
		return fmt.Sprintf("line %d: field %q: got JSON %s, want %s", lineOf(data, off), strings.TrimPrefix(e.Field, "State."), e.Value, e.Type)
	}
	if off >= 0 {
		return fmt.Sprintf("line %d: %v", lineOf(data, off), err)
	}
	return err.Error()
}

func lineOf(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// Encode writes the state as indented JSON.
func (st *State) Encode(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(st)
}
