package bgp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// ServiceFingerprint is a digest of what IPVS's mh builds a service's
// Maglev table from on this director: two directors with the same digest
// for a service send every flow of it to the same real server.
type ServiceFingerprint struct {
	Service     string `json:"service"`
	Key         string `json:"key"`
	Fingerprint string `json:"fingerprint"`
	// Inputs is what was digested, for a reader who wants to see why two
	// differ: this director's own; another's only where they differ, and
	// never in a status's list of directors (WithoutInputs).
	Inputs string `json:"inputs,omitempty"`
}

// schedFlags are the flags a scheduler reads (mh-fallback, mh-port, and
// the third, unused by mh, kept for sh).
const schedFlags = ipvsmgr.FlagSched1 | ipvsmgr.FlagSched2 | ipvsmgr.FlagSched3

// MaglevInputs is the text a service's fingerprint digests: the scheduler,
// its flags, and the real servers in the kernel's order (the order mh walks
// them: the kernel adds each destination at the head of the service's list,
// list_add in ip_vs_ctl.c, so what was added last comes first) with their
// weights. A weight-0 server is listed: it takes no slot
// but keeps its place, and its place moves the others' slots.
func MaglevInputs(vs *ipvsmgr.VirtualService) string {
	var b strings.Builder
	b.WriteString(vs.Scheduler)
	var flags []string
	for _, f := range []struct {
		bit  uint32
		name string
	}{{ipvsmgr.FlagSched1, "flag-1"}, {ipvsmgr.FlagSched2, "flag-2"}, {ipvsmgr.FlagSched3, "flag-3"}} {
		if vs.Flags&f.bit != 0 {
			flags = append(flags, f.name)
		}
	}
	if vs.Scheduler == "mh" {
		for i, f := range flags {
			flags[i] = map[string]string{"flag-1": "mh-fallback", "flag-2": "mh-port", "flag-3": "flag-3"}[f]
		}
	}
	if len(flags) > 0 {
		b.WriteString(" " + strings.Join(flags, ","))
	}
	for _, d := range vs.Dests {
		b.WriteString(" " + d.Key.String() + "/" + strconv.FormatUint(uint64(d.Weight), 10))
	}
	return b.String()
}

// Fingerprint is the first 16 hex digits of the SHA-256 of MaglevInputs.
func Fingerprint(vs *ipvsmgr.VirtualService) string {
	sum := sha256.Sum256([]byte(MaglevInputs(vs)))
	return hex.EncodeToString(sum[:8])
}

// Fingerprints are the fingerprints of the BGP-mode services (those on a
// VIP the director announces) in a kernel table, named as the desired
// state names them, sorted by name.
func Fingerprints(d *ipvsmgr.Desired, kernel *ipvsmgr.Table) []ServiceFingerprint {
	if d == nil || kernel == nil {
		return nil
	}
	vips := vipsOf(d)
	var out []ServiceFingerprint
	for _, vs := range kernel.Services {
		name, named := d.Names[vs.Key]
		if _, on := vipOf(d, vs.Key, vips); !named || !on {
			continue
		}
		out = append(out, ServiceFingerprint{Service: name, Key: vs.Key.String(), Fingerprint: Fingerprint(vs), Inputs: MaglevInputs(vs)})
	}
	slices.SortFunc(out, func(a, b ServiceFingerprint) int { return strings.Compare(a.Service, b.Service) })
	return out
}

// DirectorFingerprints is what another director of the group says of its
// services (Error: why it could not be asked).
type DirectorFingerprints struct {
	// Director names it: the URL of the director this one follows, or a
	// follower's router ID (unique among the speakers of a BGP group).
	Director string               `json:"director"`
	Services []ServiceFingerprint `json:"services,omitempty"`
	Error    string               `json:"error,omitempty"`
	// Name is the director's router ID, when it answered.
	Name string `json:"name,omitempty"`
	// Address is where it was heard: the URL this director follows, or
	// the address a follower's report came from.
	Address string `json:"address,omitempty"`
	// Via is the director that passed its report on ("" when this
	// director heard it itself).
	Via string `json:"via,omitempty"`
	// Certificate is the fingerprint of the certificate it proved, when
	// it proved one.
	Certificate string `json:"certificate,omitempty"`
	// ReportedAt is when its fingerprints were last heard, on this
	// director's clock (zero: never); AgeSeconds is how long ago that was
	// when the status was made, and Stale says it is older than
	// StaleAfter: a director gone silent is not compared, not taken as
	// matching.
	ReportedAt time.Time `json:"reported_at,omitzero"`
	AgeSeconds float64   `json:"age_seconds"`
	Stale      bool      `json:"stale,omitempty"`
}

// Mismatch is a service whose Maglev inputs differ between this director
// and another: a flow that ECMP moves between them may reach another real
// server.
type Mismatch struct {
	Service  string `json:"service"`
	Director string `json:"director"`
	Own      string `json:"own"`              // this director's fingerprint ("" when it has no such service)
	Theirs   string `json:"theirs"`           // the other's ("" when it has none)
	Why      string `json:"why"`              // in words
	Inputs   string `json:"inputs,omitempty"` // the other's inputs
}

// Compare lists the services whose fingerprints differ between own and each
// director that answered (and whose answer is not stale), and the services
// one of them lacks.
func Compare(own []ServiceFingerprint, others []DirectorFingerprints) []Mismatch {
	mine := map[string]ServiceFingerprint{}
	for _, f := range own {
		mine[f.Service] = f
	}
	var out []Mismatch
	for _, o := range others {
		if o.Error != "" || o.Stale {
			continue
		}
		theirs := map[string]ServiceFingerprint{}
		for _, f := range o.Services {
			theirs[f.Service] = f
			m, ok := mine[f.Service]
			switch {
			case !ok:
				out = append(out, Mismatch{Service: f.Service, Director: o.Director, Theirs: f.Fingerprint, Inputs: f.Inputs,
					Why: "the other director has this service in its kernel and this one has not"})
			case m.Fingerprint != f.Fingerprint:
				out = append(out, Mismatch{Service: f.Service, Director: o.Director, Own: m.Fingerprint, Theirs: f.Fingerprint, Inputs: f.Inputs,
					Why: differ(m.Inputs, f.Inputs)})
			}
		}
		for _, m := range own {
			if _, ok := theirs[m.Service]; !ok {
				out = append(out, Mismatch{Service: m.Service, Director: o.Director, Own: m.Fingerprint,
					Why: "this director has the service in its kernel and the other has not"})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Mismatch) int {
		if c := strings.Compare(a.Service, b.Service); c != 0 {
			return c
		}
		return strings.Compare(a.Director, b.Director)
	})
	return out
}

func differ(here, there string) string {
	if there == "" {
		return fmt.Sprintf("Maglev inputs differ: here %q; the other director's are in its own status", here)
	}
	return fmt.Sprintf("Maglev inputs differ: here %q, there %q", here, there)
}

// WithoutInputs is ds with every service's Inputs dropped: what a status
// shows of the other directors (their fingerprints, not what they digest,
// which only a mismatch carries), so that what others report costs a
// status little.
func WithoutInputs(ds []DirectorFingerprints) []DirectorFingerprints {
	out := make([]DirectorFingerprints, len(ds))
	for i, d := range ds {
		out[i] = d
		if d.Services != nil {
			out[i].Services = make([]ServiceFingerprint, len(d.Services))
			for j, f := range d.Services {
				f.Inputs = ""
				out[i].Services[j] = f
			}
		}
	}
	return out
}
