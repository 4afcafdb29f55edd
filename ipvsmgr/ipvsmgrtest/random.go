// Package ipvsmgrtest makes documents for tests of ipvsmgr and of the
// packages that store or compare them, and real servers for tests of checks.
package ipvsmgrtest

import (
	"math/rand/v2"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// RandomState gives a state of that many services that covers every field,
// with strings json.Marshal escapes.
func RandomState(r *rand.Rand, services int) *ipvsmgr.State {
	words := []string{"", "web", "dr", "wlc", "198.18.0.11", "2001:db8::1", "a<b>&c", `q"u\o`, "tab\there", "é", "\u2028", "\x7f"}
	w := func() string { return words[r.IntN(len(words))] }
	n := func() int { return []int{0, 1, -1, 80, 65535, 1 << 40}[r.IntN(6)] }
	st := &ipvsmgr.State{Services: []ipvsmgr.Service{}}
	for range services {
		s := ipvsmgr.Service{Name: w(), Protocol: w(), Address: w(), Port: n(), FWMark: uint32(r.IntN(3)), Interface: w(), Scheduler: w(),
			OnePacket: r.IntN(2) == 0, Persistence: n(), PersistenceNetmask: w(), Forwarding: w()}
		if r.IntN(2) == 0 {
			s.Match = []ipvsmgr.Match{{Protocol: w(), Ports: []int{n(), n()}}, {Protocol: w()}}
		}
		if r.IntN(2) == 0 {
			s.SchedulerFlags = []string{w(), w()}
		}
		if r.IntN(3) > 0 {
			e := r.IntN(2) == 0
			s.Enabled = &e
		}
		if r.IntN(3) == 0 {
			s.Check = randomCheck(r, w, n)
		}
		if r.IntN(3) == 0 {
			s.SorryServer = &ipvsmgr.SorryServer{Address: w(), Port: n()}
		}
		s.Quorum = []int{0, 0, 1, 2}[r.IntN(4)]
		if r.IntN(4) > 0 {
			s.Servers = []ipvsmgr.Server{}
		}
		for range r.IntN(4) {
			sv := ipvsmgr.Server{Name: w(), Address: w(), Port: n(), Forwarding: w(), UpperThreshold: n(), LowerThreshold: n()}
			if r.IntN(2) == 0 {
				wt := n()
				sv.Weight = &wt
			}
			if r.IntN(2) == 0 {
				e := r.IntN(2) == 0
				sv.Enabled = &e
			}
			if r.IntN(3) == 0 {
				sv.Health = w()
			}
			if r.IntN(3) == 0 {
				sv.Check = randomCheck(r, w, n)
			}
			s.Servers = append(s.Servers, sv)
		}
		st.Services = append(st.Services, s)
	}
	return st
}

// randomCheck sets each field of a check or leaves it unset, at random.
func randomCheck(r *rand.Rand, w func() string, n func() int) *ipvsmgr.Check {
	f := func() float64 { return []float64{0, 0.1, 1, 2.5, 1e-7, 1e21, 123456789.125, -3}[r.IntN(8)] }
	b := func() *bool {
		if r.IntN(3) == 0 {
			return nil
		}
		v := r.IntN(2) == 0
		return &v
	}
	c := &ipvsmgr.Check{Type: w(), Interval: f(), Timeout: f(), Rise: n(), Fall: n(), Address: w(), Port: n(), OnFailure: w(),
		StartHealthy: b(), Method: w(), Path: w(), Host: w(), ExpectBody: w(), TLSVerify: b(), SNI: w(), Send: w(),
		Expect: w(), UseRegex: b(), Protocol: w(), Name: w(), QType: w(), RCode: w(), DynamicWeight: b()}
	if r.IntN(2) == 0 {
		v := f()
		c.SlowStart = &v
	}
	if r.IntN(2) == 0 {
		c.ExpectStatus = []int{n(), 200}
	}
	if r.IntN(2) == 0 {
		c.Command = ipvsmgr.Argv{w(), w(), "%h:%p"}
	}
	return c
}
