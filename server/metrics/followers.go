package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ipvsctl/ipvsctl/server"
)

// followers reports, on a source, each director following it: a follower
// that is down exports nothing itself, so its lag is the source's to show.
type followers struct{ core *server.Core }

var (
	descFollowerLag = prometheus.NewDesc("ipvsctl_replication_follower_lag_seconds",
		"On a source: 0 while the follower has this director's current revision, else how long ago the first revision it lacks was made.",
		[]string{"follower", "fingerprint"}, nil)
	descFollowerConnected = prometheus.NewDesc("ipvsctl_replication_follower_connected",
		"On a source: 1 while the follower's long poll is open.", []string{"follower", "fingerprint"}, nil)
	descFollowersRefused = prometheus.NewDesc("ipvsctl_replication_callers_refused",
		"Directors (address and certificate) refused lately for want of a believed client certificate.", nil, nil)
)

func (f *followers) Describe(ch chan<- *prometheus.Desc) {
	ch <- descFollowerLag
	ch <- descFollowerConnected
	ch <- descFollowersRefused
}

func (f *followers) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // a scrape has no context of its own
	defer cancel()
	fs, err := f.core.Followers(ctx)
	if err != nil || len(fs) == 0 {
		return
	}
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
		ch <- prometheus.MustNewConstMetric(descFollowerLag, prometheus.GaugeValue, s.LagSeconds, s.Name, s.Fingerprint)
		ch <- prometheus.MustNewConstMetric(descFollowerConnected, prometheus.GaugeValue, connected, s.Name, s.Fingerprint)
	}
	ch <- prometheus.MustNewConstMetric(descFollowersRefused, prometheus.GaugeValue, float64(refused))
}
