-- A change made through the daemon is stored as a forward delta against the revision before it (its services
-- that did not change replaced by their index there), so that a weight change on a large director writes a
-- few kilobytes, not the whole document; every 32 revisions (or a whole document written) starts again from
-- a whole one. delta: 0 = whole, 1 = reverse delta against the next revision, 2 = forward delta against the
-- previous one. An ipvsctl from before this migration would misread such a revision: the version refuses it.
CREATE INDEX revisions_whole ON revisions (delta, id);
