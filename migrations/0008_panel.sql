-- The panel's own data. Drafts: one staged desired-state document per user, with the revision it was
-- made from (an apply based on a revision that has moved is refused). Chart points: every series' values
-- at one time, in blocks of 64 series (chunk = series id / 64), at two resolutions (res 10: 10 s points
-- kept for an hour; res 60: 1 min points kept for a day); the sampler deletes what is older.
CREATE TABLE panel_drafts (
	author     TEXT PRIMARY KEY,
	base       INTEGER NOT NULL,
	doc        TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
CREATE TABLE chart_series (
	id        INTEGER PRIMARY KEY AUTOINCREMENT,
	key       TEXT NOT NULL UNIQUE,
	last_seen INTEGER NOT NULL
);
CREATE TABLE chart_points (
	res   INTEGER NOT NULL,
	chunk INTEGER NOT NULL,
	t     INTEGER NOT NULL,
	data  BLOB NOT NULL,
	PRIMARY KEY (res, chunk, t)
) WITHOUT ROWID;
