package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp"
)

// The reports a source keeps: refused with the field named when they are
// not a director's; answered with the source's own fingerprints and every
// other report but the caller's; aged (stale after bgp.StaleAfter),
// forgotten after an hour, and bounded in number.
func TestFingerprintReports(t *testing.T) {
	c, _ := prepCore(t, nil, RealServerSSH{})
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	web := []bgp.ServiceFingerprint{{Service: "web", Key: "-t 198.18.0.100:80", Fingerprint: "a8104d13221b990f", Inputs: "mh mh-port 198.18.1.11:80/1"}}
	for _, bad := range []struct {
		rep  FingerprintReport
		want string
	}{
		{FingerprintReport{RouterID: "2001:db8::1"}, `router_id: "2001:db8::1" is not an IPv4 address`},
		{FingerprintReport{RouterID: "198.18.0.2", Services: []bgp.ServiceFingerprint{{Service: "web", Fingerprint: "not hex"}}}, `services[0].fingerprint: "not hex" is not a hex digest`},
		{FingerprintReport{Services: []bgp.ServiceFingerprint{{Fingerprint: "aa"}}}, `services[0].service: "" is not a service name`},
	} {
		_, err := c.ReportFingerprints(ReportCaller{Certificate: "sha256:1", Addr: "198.18.0.2"}, bad.rep)
		if CodeOf(err) != CodeBadInput || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want bad input %q", bad.rep, err, bad.want)
		}
	}
	if got := c.fingerprintReports(); len(got) != 0 {
		t.Fatalf("a refused report was kept: %+v", got)
	}

	if _, err := c.ReportFingerprints(ReportCaller{Certificate: "sha256:2", Addr: "198.18.0.2"}, FingerprintReport{RouterID: "198.18.0.2", Services: web}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(4 * time.Second)
	set, err := c.ReportFingerprints(ReportCaller{Certificate: "sha256:3", Addr: "198.18.0.3"}, FingerprintReport{RouterID: "198.18.0.3", Services: web})
	if err != nil {
		t.Fatal(err)
	}
	if set.Self.Error == "" { // no BGP runner in this core
		t.Errorf("the source's own entry without a speaker: %+v", set.Self)
	}
	if len(set.Others) != 1 || set.Others[0].Director != "198.18.0.2" || set.Others[0].Certificate != "sha256:2" ||
		set.Others[0].AgeSeconds != 4 || set.Others[0].Stale || set.Others[0].Address != "198.18.0.2" {
		t.Errorf("the answer to 198.18.0.3: %+v, want only 198.18.0.2, 4 s old", set.Others)
	}
	// Over plain HTTP (loopback) two followers share an address: their
	// tokens keep them apart, and one token is one report whatever router
	// ID it gives; a caller that proved nothing is refused.
	for i, rid := range []string{"198.18.0.4", "198.18.0.5", "198.18.0.6", "198.18.0.5"} {
		tok := []string{"token 1 of peer", "token 2 of peer", "token 2 of peer", "token 2 of peer"}[i]
		if _, err := c.ReportFingerprints(ReportCaller{Credential: tok, Addr: "127.0.0.1"}, FingerprintReport{RouterID: rid, Services: web}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ReportFingerprints(ReportCaller{Addr: "127.0.0.1"}, FingerprintReport{RouterID: "198.18.0.7", Services: web}); CodeOf(err) != CodeForbidden {
		t.Errorf("a report from a caller that proved nothing: %v, want forbidden", err)
	}
	now = now.Add(bgp.StaleAfter - 2*time.Second) // 198.18.0.2 is 17 s old now
	var ages []string
	for _, d := range c.fingerprintReports() {
		ages = append(ages, fmt.Sprintf("%s %.0f %v", d.Director, d.AgeSeconds, d.Stale))
	}
	if want := "198.18.0.2 17 true,198.18.0.3 13 false,198.18.0.4 13 false,198.18.0.5 13 false"; strings.Join(ages, ",") != want {
		t.Errorf("reports = %s, want %s", strings.Join(ages, ","), want)
	}
	now = now.Add(time.Hour)
	if got := c.fingerprintReports(); len(got) != 0 {
		t.Errorf("reports an hour old are kept: %+v", got)
	}
	for i := range maxReporters + 10 {
		if _, err := c.ReportFingerprints(ReportCaller{Certificate: fmt.Sprintf("sha256:%d", 100+i), Addr: "198.18.0.9"}, FingerprintReport{Services: web}); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Millisecond)
	}
	if got := c.fingerprintReports(); len(got) != maxReporters {
		t.Errorf("%d reports kept, want at most %d", len(got), maxReporters)
	}
}
