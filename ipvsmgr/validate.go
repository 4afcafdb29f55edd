package ipvsmgr

import (
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Problem is one invalid value: the field's path in the document, and what is
// wrong with the value found there.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (p Problem) Error() string { return p.Field + ": " + p.Message }

// ValidationError lists every invalid value of a document.
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return "invalid desired state: " + strings.Join(msgs, "; ")
}

// Schedulers lists the kernel's IPVS schedulers (each an ip_vs_NAME module).
func Schedulers() []string {
	return []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "mh", "fo", "ovf", "twos"}
}

const (
	maxWeight      = 65535
	maxThreshold   = 1<<31 - 1
	maxPersistence = 365 * 24 * 3600
	maxTimeout     = 2147483 // the kernel keeps timeouts as jiffies in an int
	maxDrain       = 7 * 24 * 3600
)

type validator struct {
	problems []Problem
	// bgp: the state is in BGP mode (settings.bgp), which changes defaults.
	bgp bool
}

func (v *validator) addf(field, format string, args ...any) {
	v.problems = append(v.problems, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) rangeCheck(field string, val, lo, hi int) {
	if val < lo || val > hi {
		v.addf(field, "%d is out of range %d..%d", val, lo, hi)
	}
}

func (v *validator) forwarding(field, val string) {
	if val != "" && val != "dr" && val != "nat" && val != "tun" {
		v.addf(field, "%q is not a forwarding method (want dr, nat or tun)", val)
	}
}

// parseAddr parses an IP address as the model accepts it (no zone, no CIDR).
func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q: zoned addresses are not supported", s)
	}
	a = a.Unmap()
	if a.IsUnspecified() || a.IsMulticast() {
		return netip.Addr{}, fmt.Errorf("%q is not a unicast address", s)
	}
	return a, nil
}

func validInterfaceName(s string) bool {
	return len(s) > 0 && len(s) < 16 && !strings.ContainsAny(s, "/ \t\n:") && s != "." && s != ".."
}

func (v *validator) settings(s *Settings) {
	v.forwarding("settings.network", s.Network)
	v.rangeCheck("settings.tcp_timeout", s.TCPTimeout, 0, maxTimeout)
	v.rangeCheck("settings.tcpfin_timeout", s.TCPFinTimeout, 0, maxTimeout)
	v.rangeCheck("settings.udp_timeout", s.UDPTimeout, 0, maxTimeout)
	v.rangeCheck("settings.retire_timeout", s.RetireTimeout, 0, maxDrain)
	if d := s.MaintenanceDir; d != "" && (!strings.HasPrefix(d, "/") || filepath.Clean(d) != d || strings.IndexByte(d, 0) >= 0) {
		v.addf("settings.maintenance_dir", "%q is not a clean absolute path (the directory whose files take real servers out)", d)
	}
	if s.Redundancy != nil {
		v.redundancy("settings.redundancy", s.Redundancy)
	}
	if s.Alerts != nil {
		v.alerts("settings.alerts", s.Alerts)
	}
	if s.BGP != nil {
		v.bgpSettings("settings.bgp", s.BGP)
		if s.Redundancy != nil {
			v.addf("settings.bgp", "BGP mode and settings.redundancy (VRRP) exclude each other: every director of a BGP group is active")
		}
	}
}

const (
	maxPreemptDelay = 1000 // seconds, as keepalived
	maxGARPCount    = 1000
	maxGARPDelay    = 3600
	maxSyncWait     = 3600
)

// centiseconds checks a time in seconds that VRRP carries in centiseconds.
func (v *validator) centiseconds(field string, val, lo, hi float64) {
	switch {
	case math.IsNaN(val) || val < lo || val > hi:
		v.addf(field, "%v is out of range %v..%v seconds", val, lo, hi)
	case math.Abs(val*100-math.Round(val*100)) > 1e-6:
		v.addf(field, "%v is not a whole number of hundredths of a second", val)
	}
}

// validVRRPName is a vrrp_instance's or vrrp_sync_group's name as
// keepalived's notify arguments carry it.
func validVRRPName(s string) bool {
	return s != "" && len(s) <= 64 && !strings.ContainsFunc(s, func(c rune) bool { return c <= ' ' || c == 0x7f })
}

// notifyPrograms checks keepalived's five notify programs of field.
func (v *validator) notifyPrograms(field string, n VRRPNotify) {
	for _, p := range n.Programs() {
		v.program(field+"."+p.Keyword, *p.Argv)
	}
}

func (v *validator) redundancy(field string, r *Redundancy) {
	v.rangeCheck(field+".vrid", r.VRID, 1, 255)
	if r.Instance != "" && !validVRRPName(r.Instance) {
		v.addf(field+".instance", "%q is not an instance name (1 to 64 characters, no blanks)", r.Instance)
	}
	v.notifyPrograms(field, r.VRRPNotify)
	if g := r.SyncGroup; g != nil {
		if !validVRRPName(g.Name) {
			v.addf(field+".sync_group.name", "%q is not a sync group name (1 to 64 characters, no blanks)", g.Name)
		}
		v.notifyPrograms(field+".sync_group", g.VRRPNotify)
	}
	if !validInterfaceName(r.Interface) {
		v.addf(field+".interface", "%q is not an interface name", r.Interface)
	}
	if r.AdvertInterval != 0 {
		v.centiseconds(field+".advert_interval", r.AdvertInterval, 0.01, 40.95)
	}
	var family *bool
	seen := map[netip.Addr]int{}
	for i, p := range r.UnicastPeers {
		f := fmt.Sprintf("%s.unicast_peers[%d]", field, i)
		a, err := parseAddr(p)
		if err != nil {
			v.addf(f, "%s", err)
			continue
		}
		if j, dup := seen[a]; dup {
			v.addf(f, "%s is already unicast_peers[%d]", a, j)
			continue
		}
		seen[a] = i
		if is4 := a.Is4(); family == nil {
			family = &is4
		} else if *family != is4 {
			v.addf(f, "%s is not of the family of unicast_peers[0]", a)
		}
	}
	v.centiseconds(field+".preempt_delay", r.PreemptDelay, 0, maxPreemptDelay)
	if r.PreemptSyncWait != nil {
		v.centiseconds(field+".preempt_sync_wait", *r.PreemptSyncWait, 0, maxSyncWait)
	}
	if r.SyncInterface != "" && !validInterfaceName(r.SyncInterface) {
		v.addf(field+".sync_interface", "%q is not an interface name", r.SyncInterface)
	}
	v.rangeCheck(field+".sync_id", r.SyncID, 0, 255)
	for i, name := range r.TrackInterfaces {
		if !validInterfaceName(name) {
			v.addf(fmt.Sprintf("%s.track_interfaces[%d]", field, i), "%q is not an interface name", name)
		}
	}
	if r.GARPCount != nil {
		v.rangeCheck(field+".garp_count", *r.GARPCount, 0, maxGARPCount)
	}
	if r.GARPRepeatDelay != nil {
		v.centiseconds(field+".garp_repeat_delay", *r.GARPRepeatDelay, 0, maxGARPDelay)
	}
	if r.Auth != nil {
		v.redundancyAuth(field+".auth", r.Auth)
	}
}

const maxAuthWindow = 300 // seconds, as keepalived

func (v *validator) redundancyAuth(field string, a *RedundancyAuth) {
	if len(a.Keys) == 0 {
		v.addf(field+".keys", "at least one key is needed (its id and the file that holds it)")
	}
	ids := map[int]int{}
	for i, k := range a.Keys {
		f := fmt.Sprintf("%s.keys[%d]", field, i)
		if k.ID < 1 || k.ID > 255 {
			v.addf(f+".id", "%d is out of range 1..255", k.ID)
		} else if j, dup := ids[k.ID]; dup {
			v.addf(f+".id", "%d is already keys[%d]", k.ID, j)
		} else {
			ids[k.ID] = i
		}
		switch {
		case k.File == "":
			v.addf(f+".file", "the key's file is needed (the key itself never goes in the document)")
		case !filepath.IsAbs(k.File) || filepath.Clean(k.File) != k.File || strings.ContainsRune(k.File, 0):
			v.addf(f+".file", "%q is not a clean absolute path", k.File)
		}
	}
	mode := a.Mode
	switch mode {
	case "", "enforce", "permissive", "receive-only":
	default:
		v.addf(field+".mode", "%q is not enforce, permissive or receive-only", a.Mode)
	}
	if _, ok := ids[a.Active()]; !ok && len(a.Keys) > 0 && mode != "receive-only" {
		if a.ActiveKey == 0 {
			v.addf(field+".active_key", "with %d keys, say which one signs", len(a.Keys))
		} else {
			v.addf(field+".active_key", "%d is not the id of one of the keys", a.ActiveKey)
		}
	}
	switch a.AntiReplay {
	case "", "time":
		if a.TimeWindow != 0 {
			v.rangeCheck(field+".time_window", a.TimeWindow, 1, maxAuthWindow)
		}
	case "monotonic":
		if a.TimeWindow != 0 {
			v.addf(field+".time_window", "%d: a window is for anti_replay time only", a.TimeWindow)
		}
	default:
		v.addf(field+".anti_replay", "%q is not time or monotonic", a.AntiReplay)
	}
}

func protocolNumber(s string) (uint16, bool) {
	switch s {
	case "tcp":
		return ProtoTCP, true
	case "udp":
		return ProtoUDP, true
	case "sctp":
		return ProtoSCTP, true
	}
	return 0, false
}

// parseNetmask reads a persistence netmask: a dotted IPv4 mask ("255.255.255.0")
// or, for IPv6, a prefix length ("64" or "/64").
func parseNetmask(family uint16, s string) (uint32, error) {
	if family == FamilyIPv6 {
		n, err := strconv.Atoi(strings.TrimPrefix(s, "/"))
		if err != nil || n < 1 || n > 128 {
			return 0, fmt.Errorf("%q is not an IPv6 prefix length (1..128)", s)
		}
		return uint32(n), nil
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(s, "/")); err == nil && n >= 1 && n <= 32 {
		return ^uint32(0) << (32 - n), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return 0, fmt.Errorf("%q is not an IPv4 netmask", s)
	}
	b := a.As4()
	m := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	if inv := ^m; m == 0 || inv&(inv+1) != 0 {
		return 0, fmt.Errorf("%q is not a contiguous netmask", s)
	}
	return m, nil
}

// MaxNameChars bounds the names of services and real servers, which go into
// history lines, logs, URLs and the panel.
const MaxNameChars = 64

// name checks a service's or server's name: 1..64 printable characters,
// no spaces or control characters.
func (v *validator) name(field, s string) {
	n := utf8.RuneCountInString(s)
	ok := utf8.ValidString(s) && n >= 1 && n <= MaxNameChars
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			ok = false
		}
	}
	if ok {
		return
	}
	shown := s
	if n > 40 {
		shown = string([]rune(s)[:40]) + "..."
	}
	v.addf(field, "%q is not a valid name (1..%d printable characters without spaces or control characters; this one has %d)", shown, MaxNameChars, n)
}

// groupName checks a service's group: a name as names go, and one word of
// keepalived's syntax (no quote, brace, # or !), since an export writes it
// as `virtual_server_group NAME`.
func (v *validator) groupName(field, s string) {
	v.name(field, s)
	if strings.ContainsAny(s, "\"{}#!") {
		v.addf(field, "%q: a group name cannot hold a quote, a brace, # or !", s)
	}
}
