package panel

import "testing"

// The minute points are the means of the 10 s points of their minute, given
// when the next minute's first point comes; the rings forget a series gone.
func TestSamplerMinuteMeans(t *testing.T) {
	s := newSampler(nil)
	minute := int64(29_000_000) // a minute's number: its start is minute*60
	at := func(sec int64) int64 { return minute*resCoarse + sec }
	if c, _, need := s.record(at(0), map[string]point{"a": {1, 2, 3, 4}, "b": {5, 5, 5, 5}}); c != nil || !need {
		t.Fatalf("first point: coarse %v, needIDs %v: want none and true", c, need)
	}
	if c, _, _ := s.record(at(10), map[string]point{"a": {3, 4, 5, 6}}); c != nil {
		t.Fatalf("a point within the minute gave the minute points %v", c)
	}
	c, cAt, _ := s.record(at(60), map[string]point{"a": {9, 9, 9, 9}})
	if cAt != minute*resCoarse {
		t.Errorf("the minute points are at %d, want %d", cAt, minute*resCoarse)
	}
	if want := (point{2, 3, 4, 5}); c["a"] != want {
		t.Errorf("a's minute point %v, want %v", c["a"], want)
	}
	if want := (point{5, 5, 5, 5}); c["b"] != want {
		t.Errorf("b's minute point %v, want %v (one point)", c["b"], want)
	}
	if _, ok := s.rings["b"]; ok {
		t.Error("the rings kept b after a sample without it")
	}
	if r := s.rings["a"]; r == nil || r.n != 3 || r.v[2] != 9 {
		t.Errorf("a's ring %+v, want 3 points, the last 9", r)
	}
}
