-- A real server's drain became an admin state of its own ("drained": true in the document: weight 0 in the
-- kernel, the configured weight kept), where a drain used to overwrite the weight with 0. The SQL has nothing to
-- change; the store converts the current desired state in the same transaction (store/convert.go): each real
-- server at weight 0 that had a non-zero weight in an earlier revision (the newest 100 are read) becomes drained
-- with that weight back; one that never had another weight was configured at 0 (an ipvsadm -w 0 import) and stays
-- as it is. The kernel sees no change (both are weight 0). The converted state is a new revision by "ipvsctl"
-- via "migration", so the history keeps what each revision was.
SELECT 1;
