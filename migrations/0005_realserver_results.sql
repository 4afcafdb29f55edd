-- The last real-server preparation result (push, verify or undo) per real server, for status and the panel.
-- Before this, they were kept in realserver-results.json beside the database; ipvsctl moves that file in once.
CREATE TABLE realserver_results (
	target TEXT PRIMARY KEY,
	data   TEXT NOT NULL
);
