-- Node-local settings: this director's own part in a redundant pair, kept outside the replicated revisions (each
-- director of a pair has its own priority; the pair shares settings.redundancy in the document). One row.
-- role: auto (VRRP elects), master (priority 255: the address owner) or backup (never carries the VIPs).
-- peer_url/peer_token: the other director's API, which configuration is replicated from; the token is kept here
-- because this director presents it to its peer (the database is its owner's only), and is never shown.
-- address: this director's own address among settings.redundancy.peers ("" = found from its interfaces).
CREATE TABLE node (
	id         INTEGER PRIMARY KEY CHECK (id = 1),
	priority   INTEGER NOT NULL DEFAULT 100 CHECK (priority BETWEEN 1 AND 255),
	role       TEXT    NOT NULL DEFAULT 'auto' CHECK (role IN ('auto', 'master', 'backup')),
	peer_url   TEXT    NOT NULL DEFAULT '',
	peer_token TEXT    NOT NULL DEFAULT '',
	address    TEXT    NOT NULL DEFAULT '',
	updated_at TEXT    NOT NULL DEFAULT ''
);

-- What replication last saw both directors agree on: the hash of that desired-state document. A local revision
-- with another hash is a change the peer has not had (after a split, a diverging one).
CREATE TABLE replication (
	id          INTEGER PRIMARY KEY CHECK (id = 1),
	synced_hash TEXT    NOT NULL DEFAULT '',
	synced_at   TEXT    NOT NULL DEFAULT ''
);
