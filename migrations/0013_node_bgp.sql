-- Node-local BGP settings of a director of a BGP group (settings.bgp in the document is shared by all):
-- router_id: its BGP router ID ("" = the node address, else the first global IPv4 address of its interfaces);
-- bgp_source: the address its sessions are opened from and the routes' next hop ("" = the kernel's choice);
-- bgp_drained: 1 while the operator has taken it out (node drain): it announces nothing.
ALTER TABLE node ADD COLUMN router_id   TEXT    NOT NULL DEFAULT '';
ALTER TABLE node ADD COLUMN bgp_source  TEXT    NOT NULL DEFAULT '';
ALTER TABLE node ADD COLUMN bgp_drained INTEGER NOT NULL DEFAULT 0 CHECK (bgp_drained IN (0, 1));
