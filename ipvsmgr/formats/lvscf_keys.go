package formats

// The keys Piranha's reader knows, scope by scope, as its lvsconfig.c
// (parseConfiguration, parseVirtualServer, parseActualServer) reads them:
// any other key is LVS_ERROR_BADCOMMAND, "unknown command", and lvsd
// refuses the whole file at that line. A failover block is read by the
// virtual block's parser, so it knows the same keys.
var (
	lvsGlobalKeys = keySet("primary", "serial_no", "primary_private", "primary_shared", "backup",
		"backup_active", "backup_private", "backup_shared", "reservation_conflict_action", "nat_nmask",
		"nat_router", "active_cmd", "inactive_cmd", "monitor_links", "debug_level", "hard_shutdown",
		"ipvsadm", "keepalive", "deadtime", "rsh_command", "syncdaemon", "syncd_iface", "syncd_id",
		"tcp_timeout", "tcpfin_timeout", "udp_timeout", "heartbeat", "heartbeat_port", "sync", "network",
		"service",
		// Not Piranha's: ipvsctl's own lvs.cf export writes the VRRP
		// router id of settings.redundancy here, and reads it back.
		"vrrp_vrid")
	lvsVirtualKeys = keySet("active", "address", "sorry_server", "vip_nmask", "fwmark", "protocol", "port",
		"scheduler", "persistent", "pmask", "client_monitor", "send_program", "send", "expect", "use_regex",
		"timeout", "reentry", "load_monitor", "quiesce_server", "start_cmd", "stop_cmd", "master", "dirs")
	lvsServerKeys = keySet("address", "active", "weight", "port")
)

func keySet(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// knownKey reports whether Piranha reads key in the block b (nil: the top
// level); an unknown one is an error, or a note under --ignore-unknown, and
// is neither mapped nor kept.
func (p *lvsParser) knownKey(b *lvsBlock, key string) (bool, error) {
	set, where := lvsGlobalKeys, "at the top level"
	switch {
	case b == nil:
	case b.kind == "server":
		set, where = lvsServerKeys, "in "+b.scope(p.stack[len(p.stack)-2])
	default:
		set, where = lvsVirtualKeys, "in "+b.scope(nil)
	}
	if set[key] {
		return true, nil
	}
	return false, p.im.unknown(p.line, "unknown command %q %s (Piranha's lvs.cf reader refuses it)", key, where)
}
