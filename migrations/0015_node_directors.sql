-- How this director takes part in replication between N directors, and whom it believes on the link:
-- replication: 'pair' (the two directors of a VRRP pair follow each other, the newer change wins), 'source' (the
-- director edits are made on; others follow it) or 'follower' (takes the source's every revision, refuses local
-- edits); peer_ca: a pair CA (PEM) whose certificates are believed, for the address they are used from, besides
-- the pinned fingerprints; follower_fingerprints: the directors that follow this one, allowed to call it (space-separated
-- "sha256:..." fingerprints of their client certificates), besides peer_fingerprint. All node-local.
ALTER TABLE node ADD COLUMN replication TEXT NOT NULL DEFAULT 'pair' CHECK (replication IN ('pair', 'source', 'follower'));
ALTER TABLE node ADD COLUMN peer_ca TEXT NOT NULL DEFAULT '';
ALTER TABLE node ADD COLUMN follower_fingerprints TEXT NOT NULL DEFAULT '';
