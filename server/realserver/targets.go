// Package realserver is the real servers' preparation as the director
// sees it: the targets the realserver verbs name (on the command line or in
// a --targets file), and each real-server address of the desired state with
// the target a verify from the state checks (Preps). It is pure: the core's
// verbs (server.Core.PrepareRealServers, RealServers) reach the real servers
// through package arpguard and keep the results in the store; this package
// imports neither the core nor the kernel.
package realserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/ipvsctl/ipvsctl/arpguard"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// TargetList is real servers as the realserver verbs name them on the
// command line: one target per RIP, all with the same VIPs and mode.
type TargetList struct {
	RIPs, VIPs     []string
	SSHPort        int
	Mode           string
	Interface      string
	Gateway        string
	Route          string
	ClientPrefixes []string
}

// Targets builds the list's targets; validate is false for undo, which
// needs only addresses.
func (l TargetList) Targets(validate bool) ([]arpguard.Target, error) {
	ts, err := l.targets()
	if err == nil {
		err = CheckTargets(ts, validate)
	}
	return ts, badInput(err)
}

func (l TargetList) targets() ([]arpguard.Target, error) {
	rips, err := parseAddrs("rip", l.RIPs)
	if err != nil {
		return nil, err
	}
	if len(rips) == 0 {
		return nil, errors.New("rip: at least one real server address is needed (or --targets FILE)")
	}
	vips, err := parseAddrs("vip", l.VIPs)
	if err != nil {
		return nil, err
	}
	mode, err := arpguard.ParseMode(l.Mode)
	if err != nil {
		return nil, err
	}
	var gw netip.Addr
	if l.Gateway != "" {
		if gw, err = netip.ParseAddr(l.Gateway); err != nil {
			return nil, fmt.Errorf("gateway: %q is not an address", l.Gateway)
		}
	}
	var clients []netip.Prefix
	for _, s := range l.ClientPrefixes {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("client-prefix: %q is not a prefix", s)
		}
		clients = append(clients, p)
	}
	var ts []arpguard.Target
	for _, rip := range rips {
		ts = append(ts, arpguard.Target{
			Host: netip.AddrPortFrom(rip, uint16(l.SSHPort)).String(), RIP: rip, Interface: l.Interface, VIPs: vips, Mode: mode,
			Gateway: gw, Route: arpguard.RouteMode(l.Route), ClientPrefixes: clients,
		})
	}
	return ts, nil
}

// ParseTargets reads a JSON list of targets (the realserver verbs'
// --targets file, named name in errors).
func ParseTargets(name string, data []byte, validate bool) ([]arpguard.Target, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var ts []arpguard.Target
	if err := dec.Decode(&ts); err != nil {
		return nil, badInput(fmt.Errorf("parse targets %s: %w", name, err))
	}
	return ts, badInput(CheckTargets(ts, validate))
}

// CheckTargets refuses a target without a RIP and, when validate, any
// target arpguard cannot prepare.
func CheckTargets(ts []arpguard.Target, validate bool) error {
	for _, t := range ts {
		if !t.RIP.IsValid() {
			return errors.New("rip: missing in a target")
		}
		if validate {
			if err := t.Validate(); err != nil {
				return fmt.Errorf("real server %s: %w", t.Label(), err)
			}
		}
	}
	return nil
}

func parseAddrs(field string, ss []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, v := range ss {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an address", field, v)
		}
		out = append(out, a)
	}
	return out, nil
}

// InputError is an error in what was asked (the core answers it as bad
// input), keeping its message.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func badInput(err error) error {
	if err == nil {
		return nil
	}
	return &InputError{Err: err}
}

// Prep is one real-server address of the desired state as its
// preparation sees it: the VIPs it must hold, the mode its forwarding
// needs, the target a verify from here checks, and its last result.
type Prep struct {
	RIP      string   `json:"rip"`
	VIPs     []string `json:"vips"`
	Services []string `json:"services"`
	// Mode is dr-sysctl, dr-arptables, tun or nat; modes joined with "+"
	// when its virtual services use different forwarding methods.
	Mode string `json:"mode"`
	// Target is what a verify from the desired state checks; nil when one
	// cannot be made, and Problem says why.
	Target  *arpguard.Target `json:"target,omitempty"`
	Problem string           `json:"problem,omitempty"`
	// Remembered: the interface, gateway and SSH address are those of the
	// last push or verify given them; otherwise eth0 and port 22.
	Remembered bool             `json:"remembered"`
	Result     *arpguard.Result `json:"result,omitempty"`
}

// defaultInterface is the realserver verbs' --interface default.
const defaultInterface = "eth0"

// Preps lists each real-server address of st once, in the order of the
// desired state, with the records stored for it; serviceID names a service
// as the verbs do.
func Preps(st *ipvsmgr.State, recs []store.RealServerRecord, serviceID func(*ipvsmgr.Service) string) []Prep {
	byRIP := map[string]*Prep{}
	fwds := map[string][]string{}
	var order []string
	for i := range st.Services {
		svc := &st.Services[i]
		for j := range svc.Servers {
			rs := &svc.Servers[j]
			p := byRIP[rs.Address]
			if p == nil {
				p = &Prep{RIP: rs.Address}
				byRIP[rs.Address] = p
				order = append(order, rs.Address)
			}
			fwd := firstNonEmpty(rs.Forwarding, svc.Forwarding, st.Settings.Network, "dr")
			if !slices.Contains(fwds[rs.Address], fwd) {
				fwds[rs.Address] = append(fwds[rs.Address], fwd)
			}
			if svc.Address != "" && !slices.Contains(p.VIPs, svc.Address) {
				p.VIPs = append(p.VIPs, svc.Address)
			}
			p.Services = append(p.Services, serviceID(svc))
		}
	}
	out := make([]Prep, 0, len(order))
	for _, rip := range order {
		p := byRIP[rip]
		last, spec := recordsOf(rip, recs)
		p.Result = last
		p.Remembered = spec != nil
		p.Mode, p.Target, p.Problem = prepTarget(p, fwds[rip], spec)
		out = append(out, *p)
	}
	return out
}

// recordsOf finds rip's newest result and the newest target it was
// prepared with, among every stored record naming that address.
func recordsOf(rip string, recs []store.RealServerRecord) (last *arpguard.Result, spec *arpguard.Target) {
	var specAt *arpguard.Result
	for i := range recs {
		r := &recs[i]
		if !recordFor(r, rip) {
			continue
		}
		if last == nil || r.At.After(last.At) {
			last = &r.Result
		}
		if r.Spec != nil && (specAt == nil || r.At.After(specAt.At)) {
			spec, specAt = r.Spec, &r.Result
		}
	}
	return last, spec
}

func recordFor(r *store.RealServerRecord, rip string) bool {
	if r.Spec != nil {
		return r.Spec.RIP.String() == rip
	}
	return sshHost(r.Host) == rip || r.Target == rip
}

// prepTarget is the mode and the target for a real server whose services
// forward with fwds, from what was remembered of its last push (spec).
func prepTarget(p *Prep, fwds []string, spec *arpguard.Target) (string, *arpguard.Target, string) {
	var modes []string
	for _, fwd := range fwds {
		m := map[string]arpguard.Mode{"dr": arpguard.ModeDRSysctl, "tun": arpguard.ModeTUN, "nat": arpguard.ModeNAT}[fwd]
		if m == arpguard.ModeDRSysctl && spec != nil && spec.Mode == arpguard.ModeDRArptables {
			m = arpguard.ModeDRArptables // the DR flavour is the push's choice
		}
		modes = append(modes, string(m))
	}
	mode := strings.Join(modes, "+")
	if len(modes) > 1 {
		return mode, nil, "its virtual services use different forwarding methods (" + mode + "): prepare it for each with the CLI"
	}
	rip, err := netip.ParseAddr(p.RIP)
	if err != nil {
		return mode, nil, err.Error()
	}
	t := &arpguard.Target{RIP: rip, Interface: defaultInterface, Mode: arpguard.Mode(mode)}
	if spec != nil {
		t.Name, t.Host, t.Interface = spec.Name, spec.Host, firstNonEmpty(spec.Interface, defaultInterface)
		if t.Mode == arpguard.ModeNAT && spec.Mode == arpguard.ModeNAT {
			t.Gateway, t.Route, t.ClientPrefixes = spec.Gateway, spec.Route, spec.ClientPrefixes
		}
	}
	for _, v := range p.VIPs {
		if a, err := netip.ParseAddr(v); err == nil {
			t.VIPs = append(t.VIPs, a)
		}
	}
	if err := t.Validate(); err != nil {
		msg := err.Error()
		if t.Mode == arpguard.ModeNAT && !t.Gateway.IsValid() {
			msg += " (push it once with ipvsctl realserver push --mode nat --gateway IP, which is remembered)"
		}
		return mode, nil, msg
	}
	return mode, t, ""
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// sshHost is the host of host:port (or s when it has no port).
func sshHost(s string) string {
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return s
}
