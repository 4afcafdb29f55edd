package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ipvsctl/ipvsctl/server"
)

// checker reports the health checker's own health (the daemon's
// watchdog): a handful of series whatever the number of checks; the age
// of each server's last result is the table's
// ipvsctl_backend_check_last_run_timestamp_seconds.
type checker struct{ core *server.Core }

var (
	descChecksReady = prometheus.NewDesc("ipvsctl_checks_ready",
		"1 once every health check has run once since the daemon started and a reconcile has applied the results (with no checks: the first reconcile).", nil, nil)
	descChecksNotRun = prometheus.NewDesc("ipvsctl_checks_not_run",
		"Checked real servers (of a service) whose check has no result since the daemon started.", nil, nil)
	descChecksLate = prometheus.NewDesc("ipvsctl_checks_late",
		"Distinct checks whose round is late by more than their interval now.", nil, nil)
	descChecksWorst = prometheus.NewDesc("ipvsctl_checks_worst_lateness_seconds",
		"How far the latest round of checks is behind its schedule (0: none is).", nil, nil)
	descRoundsLate = prometheus.NewDesc("ipvsctl_check_rounds_late_total",
		"Rounds of a check found late by more than its interval since the daemon started.", nil, nil)
	descStartDelay = prometheus.NewDesc("ipvsctl_check_start_delay_seconds",
		"How late each check run started against its schedule, every run since the daemon started.", nil, nil)
	descOldestResult = prometheus.NewDesc("ipvsctl_checks_oldest_result_age_seconds",
		"Age of the oldest last result of any check (0: none has run yet).", nil, nil)
)

func (c *checker) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descChecksReady, descChecksNotRun, descChecksLate, descChecksWorst, descRoundsLate, descOldestResult, descStartDelay} {
		ch <- d
	}
}

func (c *checker) Collect(ch chan<- prometheus.Metric) {
	st := c.core.CheckerStatus()
	if st == nil {
		return
	}
	ready := 0.0
	if st.Ready {
		ready = 1
	}
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	gauge(descChecksReady, ready)
	gauge(descChecksNotRun, float64(st.NotRun))
	gauge(descChecksLate, float64(st.Late))
	gauge(descChecksWorst, st.WorstLate)
	gauge(descOldestResult, st.OldestRunAge)
	ch <- prometheus.MustNewConstMetric(descRoundsLate, prometheus.CounterValue, float64(st.LateRounds))
	buckets := make(map[float64]uint64, len(st.StartDelay.Buckets))
	for _, b := range st.StartDelay.Buckets {
		buckets[b.LE] = b.Count
	}
	ch <- prometheus.MustNewConstHistogram(descStartDelay, st.StartDelay.Count, st.StartDelay.SumSeconds, buckets)
}
