package panel

import "time"

// CheckAge is when the server's check last gave a result, and how late its
// round is when the checker is behind ("checked 2s ago", "not checked yet,
// late by 4s"); "" for a server without a check.
func (r *srvRow) CheckAge() string {
	h := r.HealthOf
	if h == nil || h.Check == "" || h.Target == "" {
		return ""
	}
	s := "not checked yet"
	if h.LastCheckAge != nil {
		s = "checked " + roundAge(*h.LastCheckAge) + " ago"
	}
	if h.Late > 0 {
		s += ", late by " + roundAge(h.Late)
	}
	return s
}

func roundAge(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second))
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
