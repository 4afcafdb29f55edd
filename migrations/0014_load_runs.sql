-- Load test runs (scripts/loadtest.sh --lab, ipvsctl loadtest start/end): each run of a load generator through a
-- virtual service, marked at its start and end so the panel can draw the sampler's charts of that span.
-- test groups the runs of one load test; phase is default or tuned (the kernel's settings during the run);
-- result is the load generator's figures as JSON (requests/s, latency percentiles, CPU and softirq share, the
-- connection table's entries and buckets), set at the end.
CREATE TABLE load_runs (
	id         INTEGER PRIMARY KEY,
	test       TEXT NOT NULL,
	phase      TEXT NOT NULL CHECK (phase IN ('default', 'tuned')),
	service    TEXT NOT NULL,
	tool       TEXT NOT NULL DEFAULT '',
	started_at TEXT NOT NULL,
	ended_at   TEXT,
	result     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX load_runs_test ON load_runs (test, started_at);
