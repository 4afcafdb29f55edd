package bgp

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The source hears two followers; a follower hears the source and, through
// it, the other follower and itself (left out); a pair's director is heard
// twice and counted once; a silent director goes stale and is not compared.
func TestGroupOfNDirectors(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	web := func(fp string) []ServiceFingerprint {
		return []ServiceFingerprint{{Service: "web", Fingerprint: fp, Inputs: "mh " + fp}}
	}
	source := DirectorFingerprints{Director: "https://198.18.0.1:3636", Name: "198.18.0.1", Certificate: "cert-s", Services: web("aa"), ReportedAt: now}
	f1 := DirectorFingerprints{Director: "198.18.0.2", Name: "198.18.0.2", Certificate: "cert-1", Services: web("aa"), ReportedAt: now.Add(-2 * time.Second), Via: source.Director}
	f2 := DirectorFingerprints{Director: "198.18.0.3", Name: "198.18.0.3", Certificate: "cert-2", Services: web("bb"), ReportedAt: now.Add(-3 * time.Second), Via: source.Director}

	// Follower 1: its own report, passed back by the source, is not another director.
	got := Group(Self{RouterID: "198.18.0.2", Certificate: "cert-1"}, []DirectorFingerprints{source, f1, f2})
	Age(got, now, StaleAfter)
	var names []string
	for _, d := range got {
		names = append(names, d.Director)
	}
	if diff := cmp.Diff([]string{"198.18.0.3", "https://198.18.0.1:3636"}, names); diff != "" {
		t.Fatalf("follower 1's group (-want +got):\n%s", diff)
	}
	if got[0].AgeSeconds != 3 || got[0].Stale {
		t.Errorf("follower 2 as follower 1 sees it: age %v stale %v, want 3 s and fresh", got[0].AgeSeconds, got[0].Stale)
	}
	m := Compare(web("aa"), got)
	if len(m) != 1 || m[0].Director != "198.18.0.3" || m[0].Service != "web" || m[0].Theirs != "bb" {
		t.Errorf("follower 1's mismatches = %+v, want web on 198.18.0.3", m)
	}

	// A pair: the other director heard in its answer and in its own
	// report (no certificates over plain HTTP: the router ID tells).
	ans := DirectorFingerprints{Director: "http://127.0.0.1:1", Name: "198.18.0.9", Services: web("aa"), ReportedAt: now}
	rep := DirectorFingerprints{Director: "198.18.0.9", Name: "198.18.0.9", Services: web("aa"), ReportedAt: now.Add(-time.Second)}
	if g := Group(Self{RouterID: "198.18.0.8"}, []DirectorFingerprints{ans}, []DirectorFingerprints{rep}); len(g) != 1 || g[0].Director != ans.Director {
		t.Errorf("a pair's director twice = %+v, want its answer once", g)
	}
	// Its answer failing: its fresh report takes the place.
	failed := ans
	failed.Error, failed.ReportedAt = "connection refused", now.Add(-time.Minute)
	if g := Group(Self{RouterID: "198.18.0.8"}, []DirectorFingerprints{failed}, []DirectorFingerprints{rep}); len(g) != 1 || g[0].Error != "" || g[0].Director != "198.18.0.9" {
		t.Errorf("a failed answer beside a fresh report = %+v, want the report", g)
	}

	// Follower 2 goes silent: stale at the source after StaleAfter, and
	// its differing web is not compared (nor taken as matching).
	silent := f2
	silent.ReportedAt = now.Add(-StaleAfter - time.Second)
	g := Group(Self{RouterID: "198.18.0.1", Certificate: "cert-s"}, []DirectorFingerprints{f1, silent})
	Age(g, now, StaleAfter)
	if !g[1].Stale || g[1].AgeSeconds != 16 || g[0].Stale {
		t.Errorf("ages = %+v", g)
	}
	if m := Compare(web("aa"), g); len(m) != 0 {
		t.Errorf("a stale director compared: %+v", m)
	}
	never := []DirectorFingerprints{{Director: "x"}, {Director: "y", Error: "refused"}}
	Age(never, now, StaleAfter)
	if !never[0].Stale || never[1].Stale {
		t.Errorf("never heard: %+v, want stale without an error, not stale with one", never)
	}
}
