package ipvsmgr

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// BGP puts the director in BGP mode: it holds the VIPs on the loopback (no
// ARP for them) and announces each VIP as a /32 or /128 to the upstream
// routers while it can serve it; the routers spread flows over the
// directors by ECMP. The same on every director (it is in the document);
// each director's router ID and source address are node-local.
type BGP struct {
	ASN   int       `json:"asn"`
	Peers []BGPPeer `json:"peers"`
	// Communities are added to every route, each "ASN:VALUE".
	Communities []string `json:"communities,omitempty"`
	// MED is the multi-exit discriminator of every route.
	MED int `json:"med,omitempty"`
	// Drain is how node drain takes a director out (nil: the defaults).
	Drain *BGPDrain `json:"drain,omitempty"`
}

// BGPDrain is how node drain takes a director out without dropping
// traffic: de-prefer its routes (prepend its AS, so that the routers send
// new flows to the other directors and keep this one as a fallback) or
// withdraw them; then wait until no new connection has reached its VIPs
// for Quiet seconds, at most Timeout seconds.
type BGPDrain struct {
	// Mode is "prepend" (the default) or "withdraw".
	Mode string `json:"mode,omitempty"`
	// Prepend is how many more times the AS is put in the path (0: 3).
	Prepend int `json:"prepend,omitempty"`
	// Quiet is the seconds without a new connection that make the director
	// drained (0: 10); Timeout bounds the wait (0: 300).
	Quiet   float64 `json:"quiet,omitempty"`
	Timeout float64 `json:"timeout,omitempty"`
}

// Drain modes.
const (
	DrainPrepend  = "prepend"
	DrainWithdraw = "withdraw"
)

// DrainPolicy is settings.bgp.drain with its defaults filled in.
func (b BGP) DrainPolicy() BGPDrain {
	d := BGPDrain{}
	if b.Drain != nil {
		d = *b.Drain
	}
	if d.Mode == "" {
		d.Mode = DrainPrepend
	}
	if d.Prepend == 0 {
		d.Prepend = 3
	}
	if d.Quiet == 0 {
		d.Quiet = 10
	}
	if d.Timeout == 0 {
		d.Timeout = 300
	}
	return d
}

// BGPPeer is one upstream router.
type BGPPeer struct {
	Address string `json:"address"`
	ASN     int    `json:"asn"`
	// Port is the peer's BGP port; 0 means 179.
	Port int `json:"port,omitempty"`
	// BFD, when set, runs single-hop BFD with the peer: its loss resets
	// the session and takes the director's routes away at once.
	BFD *BFD `json:"bfd,omitempty"`
	// PasswordFile names the file on each director that holds the TCP MD5
	// signature key of the session (read when the speaker starts a session;
	// a trailing line end is not part of it). The key itself never goes in
	// the document: every viewer reads the document and every old revision.
	PasswordFile string `json:"password_file,omitempty"`
	// LegacyPassword is the key as documents before password_file held it:
	// decoded so that validation can refuse it by name (and the store's
	// migration can move it to a file), never encoded.
	LegacyPassword RefusedSecret `json:"password,omitzero"`
	// HoldTime in seconds; 0 means 90 (keepalives every third of it).
	HoldTime int `json:"hold_time,omitempty"`
}

// RefusedSecret is a secret that a document may carry in but that is never
// written out: encoding/json leaves it out whatever it holds (IsZero is
// always true, and the fields of this type are omitzero).
type RefusedSecret string

// IsZero makes encoding/json leave the field out.
func (RefusedSecret) IsZero() bool { return true }

// MarshalJSON writes nothing secret should a field lack omitzero.
func (RefusedSecret) MarshalJSON() ([]byte, error) { return []byte(`""`), nil }

// BFD timers: Interval in seconds (transmit and receive), Multiplier the
// packets lost before the session is down.
type BFD struct {
	Interval   float64 `json:"interval"`
	Multiplier int     `json:"multiplier"`
}

const (
	maxASN = 1<<32 - 1
	maxMED = 1<<32 - 1
	// MaxMD5Key is TCP_MD5SIG_MAXKEYLEN, the longest TCP MD5 key.
	MaxMD5Key     = 80
	maxBFDSeconds = 60.0
	// maxPrepend keeps a de-preferred path within what routers accept
	// (FRR's maxas-limit and most filters allow far more than 16 hops).
	maxPrepend      = 16
	maxDrainSeconds = 86400.0
)

// ParseCommunity reads a standard community "ASN:VALUE" (each 0..65535).
func ParseCommunity(s string) (uint32, error) {
	hi, lo, ok := strings.Cut(s, ":")
	a, err1 := strconv.ParseUint(hi, 10, 16)
	b, err2 := strconv.ParseUint(lo, 10, 16)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%q is not a community (want ASN:VALUE, each 0..65535)", s)
	}
	return uint32(a)<<16 | uint32(b), nil
}

func (v *validator) bgpSettings(field string, b *BGP) {
	v.rangeCheck(field+".asn", b.ASN, 1, maxASN)
	if len(b.Peers) == 0 {
		v.addf(field+".peers", "no peers: BGP mode needs at least one router to announce the VIPs to")
	}
	seen := map[netip.AddrPort]int{}
	for i := range b.Peers {
		p := &b.Peers[i]
		f := fmt.Sprintf("%s.peers[%d]", field, i)
		a, err := parseAddr(p.Address)
		if err != nil {
			v.addf(f+".address", "%s", err)
		} else {
			k := netip.AddrPortFrom(a, uint16(max(min(p.Port, 65535), 0)))
			if j, dup := seen[k]; dup {
				v.addf(f+".address", "%s is already peers[%d]", a, j)
			}
			seen[k] = i
		}
		v.rangeCheck(f+".asn", p.ASN, 1, maxASN)
		v.rangeCheck(f+".port", p.Port, 0, 65535)
		if p.HoldTime != 0 && (p.HoldTime < 3 || p.HoldTime > 65535) {
			v.addf(f+".hold_time", "%d is out of range 3..65535 seconds (or 0 for 90)", p.HoldTime)
		}
		if p.LegacyPassword != "" {
			v.addf(f+".password", "the key never goes in the document (every viewer and every old revision would hold it): write it to a file only root may read and name that file in password_file")
		}
		switch pf := p.PasswordFile; {
		case pf == "":
		case !filepath.IsAbs(pf) || filepath.Clean(pf) != pf || strings.ContainsRune(pf, 0):
			v.addf(f+".password_file", "%q is not a clean absolute path", pf)
		}
		if p.BFD != nil {
			if iv := p.BFD.Interval; math.IsNaN(iv) || iv < 0.01 || iv > maxBFDSeconds {
				v.addf(f+".bfd.interval", "%v is out of range 0.01..%v seconds", iv, maxBFDSeconds)
			}
			v.rangeCheck(f+".bfd.multiplier", p.BFD.Multiplier, 1, 255)
		}
	}
	for i, c := range b.Communities {
		if _, err := ParseCommunity(c); err != nil {
			v.addf(fmt.Sprintf("%s.communities[%d]", field, i), "%s", err)
		}
	}
	v.rangeCheck(field+".med", b.MED, 0, maxMED)
	if d := b.Drain; d != nil {
		f := field + ".drain"
		if d.Mode != "" && d.Mode != DrainPrepend && d.Mode != DrainWithdraw {
			v.addf(f+".mode", "%q is not prepend or withdraw", d.Mode)
		}
		v.rangeCheck(f+".prepend", d.Prepend, 0, maxPrepend)
		if q := d.Quiet; math.IsNaN(q) || q < 0 || q > maxDrainSeconds {
			v.addf(f+".quiet", "%v is out of range 0..%v seconds (0 for 10)", q, maxDrainSeconds)
		}
		if t := d.Timeout; math.IsNaN(t) || t < 0 || t > maxDrainSeconds {
			v.addf(f+".timeout", "%v is out of range 0..%v seconds (0 for 300)", t, maxDrainSeconds)
		} else if p := b.DrainPolicy(); p.Timeout < p.Quiet {
			v.addf(f+".timeout", "%v seconds is shorter than the quiet window of %v seconds: the drain could never be seen", p.Timeout, p.Quiet)
		}
	}
}

// BGPWarnings lists the services of a BGP-mode state whose settings would
// move flows between directors when ECMP sends a flow to another director
// (a director's loss, a drain): a scheduler that is not a consistent hash
// (mh, sh), persistence (its templates live on one director), NAT (the
// replies go back through the director that saw the first packet).
// Nothing without settings.bgp.
func BGPWarnings(st *State) []Problem {
	if st.Settings.BGP == nil {
		return nil
	}
	var out []Problem
	for i := range st.Services {
		svc := &st.Services[i]
		f := "services[" + strconv.Itoa(i) + "]"
		if s := svc.Scheduler; s != "" && s != "mh" && s != "sh" {
			out = append(out, Problem{Field: f + ".scheduler", Message: fmt.Sprintf("%q is not a consistent hash: when a director goes, its flows reach others that pick another real server (use mh)", s)})
		}
		if svc.Persistence > 0 {
			out = append(out, Problem{Field: f + ".persistence", Message: fmt.Sprintf("%d: persistence templates are kept per director and are lost when ECMP moves a client", svc.Persistence)})
		}
		fwd := svc.Forwarding
		if fwd == "" {
			fwd = st.Settings.Network
		}
		if fwd == "nat" {
			out = append(out, Problem{Field: f + ".forwarding", Message: "nat: replies must return through the director that saw the flow, which ECMP does not keep (use dr or tun)"})
		}
		if svc.Check != nil {
			out = weightWarnings(out, f+".check", svc.Check, *svc.Check)
		}
		for j := range svc.Servers {
			sf := fmt.Sprintf("%s.servers[%d]", f, j)
			if svc.Servers[j].Forwarding == "nat" && fwd != "nat" {
				out = append(out, Problem{Field: sf + ".forwarding", Message: "nat: replies must return through the director that saw the flow (use dr or tun)"})
			}
			if c := svc.Servers[j].Check; c != nil {
				out = weightWarnings(out, sf+".check", c, mergeChecks(svc.Check, c))
			}
		}
	}
	return out
}

// weightWarnings warns of what in check c (at field f; eff is the check
// the server runs with c laid over its service's) sets a real server's
// weight on each director on its own: mh gives a server slots by its
// weight, so while the weights differ the directors' Maglev tables do, and
// a flow ECMP moves to another director may reach another real server.
func weightWarnings(out []Problem, f string, c *Check, eff Check) []Problem {
	if c.SlowStart != nil && *c.SlowStart > 0 && eff.Type != "none" {
		out = append(out, Problem{Field: f + ".slow_start", Message: fmt.Sprintf("%v seconds: a server coming back ramps its weight up on each director from the moment that director's check passes, so the directors' mh tables differ while it ramps", *c.SlowStart)})
	}
	if c.Type != "" {
		switch {
		case eff.Type == "agent":
			out = append(out, Problem{Field: f + ".type", Message: `"agent": the agent's answer to each director sets the server's weight there, so the directors' mh tables differ whenever their answers do`})
		case eff.Type == "file" && (eff.FileWeight == nil || *eff.FileWeight != 0):
			out = append(out, Problem{Field: f + ".type", Message: `"file": the file's number, read by each director at its own time, is added to the server's weight there, so the directors' mh tables can differ (file_weight 0 only takes the server out)`})
		}
	}
	if eff.Type == "exec" && eff.DynamicWeight != nil && *eff.DynamicWeight && (c.DynamicWeight != nil || c.Type != "") {
		out = append(out, Problem{Field: f + ".dynamic_weight", Message: "true: the program's exit status on each director sets the server's weight there, so the directors' mh tables differ whenever their runs do"})
	}
	return out
}

// LoopbackInterface holds the VIPs in BGP mode: the routers reach them
// through the announced routes, and no director answers ARP for them.
const LoopbackInterface = "lo"

// vipInterface is where a service's VIP is brought up: its interface, or
// in BGP mode the loopback whatever it says.
func vipInterface(svc *Service, bgp bool) string {
	if bgp && svc.Address != "" {
		return LoopbackInterface
	}
	return svc.Interface
}

// canonicalOrder sorts a service's real servers by address and port: mh
// builds its Maglev table walking the destinations in order, so every
// director of a BGP group adds them in the same order to get the same table.
func canonicalOrder(ds []*Destination) {
	slices.SortStableFunc(ds, func(a, b *Destination) int {
		if c := a.Key.Addr.Compare(b.Key.Addr); c != 0 {
			return c
		}
		return cmp.Compare(a.Key.Port, b.Key.Port)
	})
}

// quiesceFailures makes every check quiesce its server on failure (weight
// 0) instead of removing it, and hold its place at weight 0 before its
// first check: IPVS adds a destination at the head of the service's list,
// so a server removed and re-added, or added when its first check passes,
// takes a place of its own on each director, and mh's Maglev table
// (built walking that list) differs between directors under some flows.
func quiesceFailures(cs []ServerCheck) {
	for i := range cs {
		cs[i].OnFailure = "quiesce"
		cs[i].HoldPlace = true
	}
}
