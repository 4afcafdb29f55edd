-- A load run's web tier (issue 31): web_phase is default or tuned (the real servers' web servers, nginx or
-- HAProxy, as shipped or after `ipvsctl realserver tune push --apply`), or '' when the run did not say.
ALTER TABLE load_runs ADD COLUMN web_phase TEXT NOT NULL DEFAULT '' CHECK (web_phase IN ('', 'default', 'tuned'));
