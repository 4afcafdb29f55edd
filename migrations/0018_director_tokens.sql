-- director_at: when a token became a director's (made with token create --director, or first used for a call
-- between directors). Over TLS such a token is taken only with the director's believed client certificate.
ALTER TABLE tokens ADD COLUMN director_at TEXT;
