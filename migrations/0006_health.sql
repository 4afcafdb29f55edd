-- Health is observed, not decided: it is kept here, never in the revisions. health_current holds each checked
-- real server's state in each service (so that a restarted daemon neither puts a dead server in nor takes every
-- server out until its first check); health_transitions its recent changes, at most 100 per server (the store
-- prunes older ones as it inserts). service and server are the kernel keys as text: "-t 198.18.0.100:80",
-- "198.18.0.11:80". weight is the weight the checks gave it (NULL: its configured weight).
CREATE TABLE health_current (
	service TEXT    NOT NULL,
	server  TEXT    NOT NULL,
	state   TEXT    NOT NULL CHECK (state IN ('up', 'down', 'unknown')),
	since   TEXT    NOT NULL,
	reason  TEXT    NOT NULL,
	weight  INTEGER,
	fault   TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (service, server)
) WITHOUT ROWID;

CREATE TABLE health_transitions (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	service    TEXT    NOT NULL,
	server     TEXT    NOT NULL,
	at         TEXT    NOT NULL,
	from_state TEXT    NOT NULL,
	to_state   TEXT    NOT NULL,
	reason     TEXT    NOT NULL,
	weight     INTEGER,
	fault      TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX health_transitions_by_server ON health_transitions (service, server, id);
