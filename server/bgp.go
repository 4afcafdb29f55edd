package server

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// BGPStatus is what a director of a BGP group announces and why, and its
// sessions to the routers.
type BGPStatus struct {
	RouterID string           `json:"router_id"`
	Source   string           `json:"source,omitempty"`
	Drained  bool             `json:"drained"`
	Peers    []bgp.PeerStatus `json:"peers"`
	VIPs     []bgp.Decision   `json:"vips"`
	// Announced counts the prefixes announced now.
	Announced int `json:"announced"`
	// Warnings are the services whose settings move flows between directors.
	Warnings []ipvsmgr.Problem `json:"warnings,omitempty"`
	// Drain is how far node drain has come (nil while not drained).
	Drain *bgp.DrainStatus `json:"drain,omitempty"`
	// Fingerprints are this director's Maglev inputs per BGP-mode service;
	// Directors what the other directors it knows said of theirs, and
	// Mismatches where the two differ (Mismatch: there is one).
	Fingerprints []bgp.ServiceFingerprint   `json:"fingerprints"`
	Directors    []bgp.DirectorFingerprints `json:"directors,omitempty"`
	Mismatches   []bgp.Mismatch             `json:"mismatches,omitempty"`
	Mismatch     bool                       `json:"mismatch"`
	// Error is why the speaker is not running or could not announce.
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}

// bgpState is the BGP runner's part of the core; its zero value is ready.
type bgpState struct {
	status atomic.Pointer[BGPStatus]
	once   sync.Once
	wake   chan struct{}
	// reports are the Maglev fingerprints the followers sent (bgp_reports.go).
	reports reportTable
}

func (b *bgpState) wakeC() chan struct{} {
	b.once.Do(func() { b.wake = make(chan struct{}, 1) })
	return b.wake
}

func (c *Core) bgpStatus() *BGPStatus { return c.bgp.status.Load() }

// BGPStatus is the BGP runner's latest status (nil outside BGP mode).
func (c *Core) BGPStatus() *BGPStatus { return c.bgpStatus() }

func (c *Core) bgpNodeChanged() { poke(c.bgp.wakeC()) }

// setNodeBGP applies the BGP fields of a node patch.
func setNodeBGP(n *store.Node, p NodePatch, detail *[]string) error {
	if p.RouterID != nil {
		if v := *p.RouterID; v != "" {
			if a, err := netip.ParseAddr(v); err != nil || !a.Is4() {
				return errorf(CodeBadInput, "router_id: %q is not an IPv4 address (a BGP router ID is one)", v)
			}
		}
		n.RouterID = *p.RouterID
		*detail = append(*detail, "router_id "+orDefault(n.RouterID, `""`))
	}
	if p.BGPSource != nil {
		if v := *p.BGPSource; v != "" {
			if _, err := netip.ParseAddr(v); err != nil {
				return errorf(CodeBadInput, "bgp_source: %q is not an IP address", v)
			}
		}
		n.BGPSource = *p.BGPSource
		*detail = append(*detail, "bgp_source "+orDefault(n.BGPSource, `""`))
	}
	if p.Drained != nil {
		n.BGPDrained = *p.Drained
		*detail = append(*detail, map[bool]string{true: "drained", false: "undrained"}[n.BGPDrained])
	}
	return nil
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
