package server

import "time"

// AlertDelivery is how the alerts to one destination (the mail relay,
// a webhook) fare: the last delivery that worked, the last that did not
// and why, how many wait, and the counts since the daemon started.
type AlertDelivery struct {
	// Kind is smtp or webhook; Destination the relay (host:port) or the
	// webhook's URL.
	Kind        string     `json:"kind"`
	Destination string     `json:"destination"`
	LastOK      *time.Time `json:"last_ok,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	// Queued are the alerts waiting (the one being sent not counted).
	Queued  int    `json:"queued"`
	Sent    uint64 `json:"sent"`
	Failed  uint64 `json:"failed"`
	Dropped uint64 `json:"dropped"`
}

// Failing is whether the destination's last delivery failed.
func (d AlertDelivery) Failing() bool {
	return d.LastErrorAt != nil && (d.LastOK == nil || d.LastErrorAt.After(*d.LastOK))
}

// AlertDeliveries are the alert sender's destinations as it last saw them,
// every configured one listed (nil without a daemon that sends alerts).
func (c *Core) AlertDeliveries() []AlertDelivery {
	f := c.alerts.Load()
	if f == nil || *f == nil {
		return nil
	}
	return (*f)()
}
