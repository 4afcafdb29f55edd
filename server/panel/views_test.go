package panel

import "testing"

// Each view's template is parsed on its first use, not by New: a director
// whose panel nobody opens does not keep them (2.4 MB of heap). Every view
// parses, as New used to check.
func TestViewsParsedOnFirstUse(t *testing.T) {
	e := newEnv(t)
	v := e.panel.views
	if n := v.parsed.Load(); n != 0 {
		t.Fatalf("%d views parsed before any page was asked for", n)
	}
	for name := range viewPartials {
		if _, err := v.get(name); err != nil {
			t.Error(err)
		}
	}
	if _, err := v.get("login"); err != nil || int(v.parsed.Load()) != len(viewPartials) {
		t.Errorf("after every view and login again: %d parsed (err %v), want each of the %d once", v.parsed.Load(), err, len(viewPartials))
	}
	if _, err := v.get("no such view"); err == nil {
		t.Error("a view that does not exist was found")
	}
}
