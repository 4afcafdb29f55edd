package server

import (
	"encoding/hex"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
)

// FingerprintReport is what a director following this one says of its
// Maglev inputs, every few seconds (POST /api/v1/bgp/fingerprints, a
// call between directors: a believed client certificate and a token).
type FingerprintReport struct {
	// RouterID is its BGP router ID, which names it to the group.
	RouterID string                   `json:"router_id"`
	Services []bgp.ServiceFingerprint `json:"services"`
	// Error is why it has no fingerprints to give (its speaker is off).
	Error string `json:"error,omitempty"`
}

// FingerprintSet is the answer to a report: this director's own
// fingerprints (Self: its Director left for the caller to name) and every
// other report it holds but the caller's, each with its age here.
type FingerprintSet struct {
	Self   bgp.DirectorFingerprints   `json:"self"`
	Others []bgp.DirectorFingerprints `json:"others"`
}

// ReportCaller is who made a report: the certificate it proved ("" over
// plain HTTP on loopback), the credential it authenticated with (a token's
// id: "token 12") and its address. Its identity keys its report: the
// certificate, else the credential, never what the report says of itself.
type ReportCaller struct {
	Certificate string
	Credential  string
	Addr        string
}

func (c ReportCaller) identity() string {
	if c.Certificate != "" {
		return "certificate " + c.Certificate
	}
	return "(plain HTTP) " + c.Credential
}

// MaxReportBody bounds a report's body (413 past it): 1,000 services'
// fingerprints without their inputs (some 80 bytes each) fit.
const MaxReportBody = 96 << 10

// Bounds of what a report may hold and how long one is kept: at most one
// report per director identity, and at most maxReporters identities.
const (
	maxReporters       = 64
	maxReportServices  = 2048
	maxReportString    = 4 << 10
	reportForgottenAge = time.Hour
)

// reportTable is the latest report of each director that reported here,
// by its identity (ReportCaller.identity).
type reportTable struct {
	mu sync.Mutex
	m  map[string]bgp.DirectorFingerprints
}

func (c FingerprintReport) check() error {
	if c.RouterID != "" {
		if a, err := netip.ParseAddr(c.RouterID); err != nil || !a.Is4() {
			return errorf(CodeBadInput, "router_id: %q is not an IPv4 address", c.RouterID)
		}
	}
	if len(c.Error) > maxReportString {
		return errorf(CodeBadInput, "error: longer than %d bytes", maxReportString)
	}
	if len(c.Services) > maxReportServices {
		return errorf(CodeBadInput, "services: %d services, at most %d", len(c.Services), maxReportServices)
	}
	for i, f := range c.Services {
		if f.Service == "" || len(f.Service) > 256 {
			return errorf(CodeBadInput, "services[%d].service: %q is not a service name", i, f.Service)
		}
		if _, err := hex.DecodeString(f.Fingerprint); err != nil || f.Fingerprint == "" || len(f.Fingerprint) > 64 {
			return errorf(CodeBadInput, "services[%d].fingerprint: %q is not a hex digest", i, f.Fingerprint)
		}
		if len(f.Key) > 256 || len(f.Inputs) > maxReportString {
			return errorf(CodeBadInput, "services[%d]: key or inputs longer than allowed", i)
		}
	}
	return nil
}

// ReportFingerprints keeps a following director's report and answers this
// director's own fingerprints and the other reports it holds: that is how
// every director of N learns every other's, through the source.
func (c *Core) ReportFingerprints(caller ReportCaller, rep FingerprintReport) (*FingerprintSet, error) {
	if err := rep.check(); err != nil {
		return nil, err
	}
	if caller.Certificate == "" && caller.Credential == "" {
		return nil, errorf(CodeForbidden, "a fingerprint report comes from a director that proved who it is (a certificate, or a token)")
	}
	key := caller.identity()
	now := c.now()
	d := bgp.DirectorFingerprints{Director: orDefault(rep.RouterID, caller.Addr), Name: rep.RouterID, Address: caller.Addr,
		Certificate: caller.Certificate, Services: rep.Services, Error: rep.Error, ReportedAt: now}
	if d.Services == nil && d.Error == "" {
		d.Services = []bgp.ServiceFingerprint{}
	}
	t := &c.bgp.reports
	t.mu.Lock()
	if t.m == nil {
		t.m = map[string]bgp.DirectorFingerprints{}
	}
	if _, ok := t.m[key]; !ok && len(t.m) >= maxReporters {
		var oldest string
		for k, v := range t.m {
			if oldest == "" || v.ReportedAt.Before(t.m[oldest].ReportedAt) {
				oldest = k
			}
		}
		delete(t.m, oldest)
	}
	t.m[key] = d
	t.mu.Unlock()
	set := &FingerprintSet{Self: bgp.DirectorFingerprints{Certificate: c.fingerprint(), ReportedAt: now}}
	if st := c.bgpStatus(); st == nil {
		set.Self.Error = "it runs no BGP speaker (no daemon there, or no settings.bgp)"
	} else {
		set.Self.Name, set.Self.Services = st.RouterID, st.Fingerprints
		if set.Self.Services == nil {
			set.Self.Services = []bgp.ServiceFingerprint{}
		}
	}
	for k, o := range c.reportsAt(now) {
		if k != key {
			set.Others = append(set.Others, o)
		}
	}
	slices.SortFunc(set.Others, func(a, b bgp.DirectorFingerprints) int { return strings.Compare(a.Director, b.Director) })
	return set, nil
}

// reportsAt are the reports held, by key, aged at now; those older than
// reportForgottenAge are forgotten.
func (c *Core) reportsAt(now time.Time) map[string]bgp.DirectorFingerprints {
	t := &c.bgp.reports
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]bgp.DirectorFingerprints, len(t.m))
	for k, d := range t.m {
		if now.Sub(d.ReportedAt) > reportForgottenAge {
			delete(t.m, k)
			continue
		}
		ds := []bgp.DirectorFingerprints{d}
		bgp.Age(ds, now, bgp.StaleAfter)
		out[k] = ds[0]
	}
	return out
}

// fingerprintReports are the reports the directors following this one
// sent, each with its age (stale past bgp.StaleAfter).
func (c *Core) fingerprintReports() []bgp.DirectorFingerprints {
	var out []bgp.DirectorFingerprints
	for _, d := range c.reportsAt(c.now()) {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b bgp.DirectorFingerprints) int { return strings.Compare(a.Director, b.Director) })
	return out
}
