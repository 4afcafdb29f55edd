-- identity_cert: the certificate file serve last started with (its --tls-cert, or the self-signed one beside the
-- database), as an absolute path, so that node show run without the daemon prints the fingerprint the peers see.
ALTER TABLE node ADD COLUMN identity_cert TEXT NOT NULL DEFAULT '';
