package metrics

import (
	"github.com/ipvsctl/ipvsctl/server"
)

// checker reports the health checker's own health (the daemon's
// watchdog): a handful of series whatever the number of checks; the age
// of each server's last result is the table's
// ipvsctl_backend_check_last_run_timestamp_seconds.
type checker struct{ core *server.Core }

func (c *checker) write(e *expo) {
	st := c.core.CheckerStatus()
	if st == nil {
		return
	}
	ready := 0.0
	if st.Ready {
		ready = 1
	}
	gauge := func(name, help string, v float64) { e.family(name, "gauge", help).add(v) }
	gauge("ipvsctl_checks_ready", "1 once every health check has run once since the daemon started and a reconcile has applied the results (with no checks: the first reconcile).", ready)
	gauge("ipvsctl_checks_not_run", "Checked real servers (of a service) whose check has no result since the daemon started.", float64(st.NotRun))
	gauge("ipvsctl_checks_late", "Distinct checks whose round is late by more than their interval now.", float64(st.Late))
	gauge("ipvsctl_checks_worst_lateness_seconds", "How far the latest round of checks is behind its schedule (0: none is).", st.WorstLate)
	gauge("ipvsctl_checks_oldest_result_age_seconds", "Age of the oldest last result of any check (0: none has run yet).", st.OldestRunAge)
	e.family("ipvsctl_check_rounds_late_total", "counter", "Rounds of a check found late by more than its interval since the daemon started.").add(float64(st.LateRounds))
	bounds, counts := make([]float64, 0, len(st.StartDelay.Buckets)), make([]uint64, 0, len(st.StartDelay.Buckets))
	for _, b := range st.StartDelay.Buckets {
		bounds, counts = append(bounds, b.LE), append(counts, b.Count)
	}
	e.family("ipvsctl_check_start_delay_seconds", "histogram", "How late each check run started against its schedule, every run since the daemon started.").
		histogram(bounds, counts, st.StartDelay.SumSeconds, st.StartDelay.Count)
}
