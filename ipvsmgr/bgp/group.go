package bgp

import (
	"slices"
	"strings"
	"time"
)

// StaleAfter is how old a director's fingerprints may be before they are
// stale: three of the daemon's 5 s reports missed.
const StaleAfter = 15 * time.Second

// Self is how this director is known to the others, so that its own
// report, passed back by another director, is not taken for another's.
type Self struct {
	RouterID    string
	Certificate string
}

func (s Self) is(d DirectorFingerprints) bool {
	return s.Certificate != "" && d.Certificate == s.Certificate || s.RouterID != "" && d.Name == s.RouterID
}

// Group is every other director this one knows, once: the lists are
// taken in order (what this director heard itself first), and a director
// met again (the same certificate, router ID or name: a pair's director
// is heard both in its answer and in its own report) keeps its first
// entry, unless that one has an error and the later not, or is stale
// beside the later.
// This director's own report, passed back, is left out. The result is
// sorted by Director.
func Group(self Self, lists ...[]DirectorFingerprints) []DirectorFingerprints {
	var out []DirectorFingerprints
	same := func(a, b DirectorFingerprints) bool {
		return a.Certificate != "" && a.Certificate == b.Certificate || a.Name != "" && a.Name == b.Name || a.Director == b.Director
	}
	for _, l := range lists {
		for _, d := range l {
			if self.is(d) {
				continue
			}
			j := slices.IndexFunc(out, func(o DirectorFingerprints) bool { return same(o, d) })
			switch {
			case j < 0:
				out = append(out, d)
			case d.Error == "" && (out[j].Error != "" || d.ReportedAt.After(out[j].ReportedAt.Add(StaleAfter))):
				out[j] = d
			}
		}
	}
	slices.SortStableFunc(out, func(a, b DirectorFingerprints) int { return strings.Compare(a.Director, b.Director) })
	return out
}

// Age sets each director's AgeSeconds and Stale at now: one never heard,
// or heard more than staleAfter ago, is stale (its error, if any, stays).
func Age(ds []DirectorFingerprints, now time.Time, staleAfter time.Duration) {
	for i := range ds {
		d := &ds[i]
		if d.ReportedAt.IsZero() {
			d.AgeSeconds, d.Stale = 0, d.Error == ""
			continue
		}
		age := max(0, now.Sub(d.ReportedAt))
		d.AgeSeconds = age.Round(100 * time.Millisecond).Seconds()
		d.Stale = age > staleAfter
	}
}
