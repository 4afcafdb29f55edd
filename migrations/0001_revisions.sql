-- Every change of the desired state is a revision: who made it, when, through which interface, a summary of
-- what changed, and the whole desired-state document as it stood after the change.
CREATE TABLE revisions (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	created_at TEXT    NOT NULL,
	author     TEXT    NOT NULL,
	via        TEXT    NOT NULL,
	summary    TEXT    NOT NULL,
	state      TEXT    NOT NULL,
	state_hash TEXT    NOT NULL
);

-- What ipvsctl owns in the kernel between reconciles (services it created, VIPs it added, drains under way).
CREATE TABLE ledger (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	data TEXT    NOT NULL
);
