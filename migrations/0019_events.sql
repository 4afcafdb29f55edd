-- events: what the director told of as it happened (server/events): a real server down or back, a VRRP role
-- change, a route withdrawn, a revision stored. The daemon numbers them (id) and writes them in batches; a
-- reader of GET /api/v1/events resumes from an id. Bounded: the newest store.EventsKept, and --retain-days.
CREATE TABLE events (
	id INTEGER PRIMARY KEY,
	at TEXT NOT NULL,
	type TEXT NOT NULL,
	subject TEXT NOT NULL,
	message TEXT NOT NULL,
	fields TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_at ON events (at);
