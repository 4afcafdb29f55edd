package metrics

import (
	"context"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

// followers reports, on a source, each director following it: a follower
// that is down exports nothing itself, so its lag is the source's to show.
type followers struct{ core *server.Core }

func (f *followers) write(e *expo) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // a scrape has no context of its own
	defer cancel()
	fs, err := f.core.Followers(ctx)
	if err != nil || len(fs) == 0 {
		return
	}
	lag := e.family("ipvsctl_replication_follower_lag_seconds", "gauge",
		"On a source: 0 while the follower has this director's current revision, else how long ago the first revision it lacks was made.",
		"follower", "fingerprint")
	conn := e.family("ipvsctl_replication_follower_connected", "gauge",
		"On a source: 1 while the follower's long poll is open.", "follower", "fingerprint")
	refused := 0
	for _, s := range fs {
		if s.Refused {
			refused++
			continue
		}
		connected := 0.0
		if s.Connected {
			connected = 1
		}
		lag.add(s.LagSeconds, s.Name, s.Fingerprint)
		conn.add(connected, s.Name, s.Fingerprint)
	}
	e.family("ipvsctl_replication_callers_refused", "gauge",
		"Directors (address and certificate) refused lately for want of a believed client certificate.").add(float64(refused))
}
