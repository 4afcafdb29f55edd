package panel

import (
	"strconv"
	"time"
)

// CheckAge is how long ago the server's check last gave a result ("0.4s
// ago"); "" for a server without a check or before its first result.
func (r *srvRow) CheckAge() string {
	if h := r.HealthOf; h != nil && h.LastCheckAge != nil {
		return roundAge(*h.LastCheckAge) + " ago"
	}
	return ""
}

// CheckLate is how late its check's round is when the checker is behind
// ("late by 4s"), else "".
func (r *srvRow) CheckLate() string {
	if h := r.HealthOf; h != nil && h.Late > 0 {
		return "late by " + roundAge(h.Late)
	}
	return ""
}

func roundAge(seconds float64) string {
	if seconds < 10 {
		return strconv.FormatFloat(seconds, 'f', 1, 64) + "s"
	}
	return time.Duration(seconds * float64(time.Second)).Round(time.Second).String()
}
