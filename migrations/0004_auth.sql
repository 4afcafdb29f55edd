-- Who may use the panel and the API, and a record of what everyone did. No user exists until an operator makes
-- one with `ipvsctl user add`: there is no default password. Times are UTC text of fixed width
-- (2006-01-02T15:04:05.000000Z), so that they compare as they sort.
CREATE TABLE users (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	name          TEXT    NOT NULL UNIQUE,
	role          TEXT    NOT NULL CHECK (role IN ('admin', 'operator', 'viewer')),
	password_hash TEXT    NOT NULL,
	created_at    TEXT    NOT NULL,
	updated_at    TEXT    NOT NULL
);

-- A panel session. id_hash is the SHA-256 of the random cookie value: a copy of the database does not hold
-- a cookie anyone could present. A session ends at idle_expires_at (moved on by use) or at expires_at
-- (fixed at login), whichever comes first.
CREATE TABLE sessions (
	id_hash         TEXT    PRIMARY KEY,
	user_id         INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	created_at      TEXT    NOT NULL,
	last_seen_at    TEXT    NOT NULL,
	idle_expires_at TEXT    NOT NULL,
	expires_at      TEXT    NOT NULL,
	client_addr     TEXT    NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);

-- An API token. Only the SHA-256 of the whole token is kept; prefix is its public, random part, shown in
-- lists so that a token can be named without its secret. A revoked token's row stays, for the audit trail.
CREATE TABLE tokens (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	user_id      INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	name         TEXT    NOT NULL,
	prefix       TEXT    NOT NULL UNIQUE,
	hash         TEXT    NOT NULL UNIQUE,
	created_at   TEXT    NOT NULL,
	expires_at   TEXT,
	last_used_at TEXT,
	revoked_at   TEXT
);
CREATE UNIQUE INDEX tokens_active_name ON tokens (name) WHERE revoked_at IS NULL;
CREATE INDEX tokens_user ON tokens (user_id);

-- Every write and every login attempt, success or failure. actor is a name as given (a user that may not
-- exist, or the OS user for the CLI), not a reference: the record outlives the user.
CREATE TABLE audit (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	at          TEXT    NOT NULL,
	actor       TEXT    NOT NULL,
	via         TEXT    NOT NULL CHECK (via IN ('cli', 'api', 'panel')),
	client_addr TEXT    NOT NULL,
	action      TEXT    NOT NULL,
	target      TEXT    NOT NULL,
	revision    INTEGER,
	outcome     TEXT    NOT NULL CHECK (outcome IN ('success', 'failure')),
	detail      TEXT    NOT NULL
);
CREATE INDEX audit_at ON audit (at);
CREATE INDEX audit_actor ON audit (actor, id);
