-- The newest revision keeps the whole document; when a new one comes, the one before it is rewritten as a
-- reverse delta against it (its unchanged services replaced by their index in the newer document), so that
-- a large director's history grows by what changed, not by the whole document each time.
-- delta: 0 = state is the whole document, 1 = state is a reverse delta against the next revision.
ALTER TABLE revisions ADD COLUMN delta INTEGER NOT NULL DEFAULT 0;
