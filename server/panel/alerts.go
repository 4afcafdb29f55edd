package panel

import (
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

// alertsCard is the settings page's card of the alert destinations: how
// each one's deliveries fare (the core's AlertDeliveries, as
// `ipvsctl status` prints them).
type alertsCard struct {
	Rows []alertRow
}

type alertRow struct {
	Kind, Destination, State, StateClass, LastOK, LastError string
	Queued                                                  int
	Sent, Failed, Dropped                                   uint64
}

func alertsCardOf(ds []server.AlertDelivery, now time.Time) *alertsCard {
	if len(ds) == 0 {
		return nil
	}
	ago := func(t *time.Time) string {
		if t == nil {
			return "never"
		}
		return t.Local().Format(time.DateTime) + " (" + now.Sub(*t).Round(time.Second).String() + " ago)"
	}
	c := &alertsCard{}
	for _, d := range ds {
		row := alertRow{Kind: d.Kind, Destination: d.Destination, LastOK: ago(d.LastOK), Queued: d.Queued,
			Sent: d.Sent, Failed: d.Failed, Dropped: d.Dropped, State: "nothing sent yet", StateClass: "st-unknown"}
		switch {
		case d.Failing():
			row.State, row.StateClass = "failing", "st-down"
		case d.LastOK != nil:
			row.State, row.StateClass = "delivering", "st-up"
		}
		if d.LastErrorAt != nil {
			row.LastError = ago(d.LastErrorAt) + ": " + d.LastError
		}
		c.Rows = append(c.Rows, row)
	}
	return c
}
