-- A new document is compared with the current one directly (state = ?): hashing a large document cost more
-- than the comparison, on every write.
ALTER TABLE revisions DROP COLUMN state_hash;
