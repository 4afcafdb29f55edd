-- Refused logins are one row per (user, client address, window) however many there were: repeats counts them and
-- last_at says when the latest came (at stays the first), so that a flood of wrong passwords cannot fill the disk.
ALTER TABLE audit ADD COLUMN repeats INTEGER NOT NULL DEFAULT 1;
ALTER TABLE audit ADD COLUMN last_at TEXT    NOT NULL DEFAULT '';
-- The retention's deletes go by age.
CREATE INDEX health_transitions_at ON health_transitions (at);
