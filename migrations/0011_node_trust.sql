-- How this director trusts its peer: peer_fingerprint is the SHA-256 fingerprint ("sha256:" and 64 hex digits) of
-- the certificate the peer's https:// API must show (no system root is believed); allow_replicated_exec lets a
-- replicated document bring fields that run programs (exec checks) onto this director (off: such a document is
-- refused and the conflict shown). Both are this director's own, never replicated.
ALTER TABLE node ADD COLUMN peer_fingerprint TEXT NOT NULL DEFAULT '';
ALTER TABLE node ADD COLUMN allow_replicated_exec INTEGER NOT NULL DEFAULT 0 CHECK (allow_replicated_exec IN (0, 1));
