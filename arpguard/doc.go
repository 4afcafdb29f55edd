// Package arpguard prepares LVS real servers for the forwarding method their
// director uses: direct routing (the VIP held without answering ARP for it, by
// sysctls or by arptables), IPIP tunnelling, and NAT (replies routed back
// through the director).
//
// A Target describes one real server. Plan turns it into a list of typed Steps;
// the same plan is rendered as a shell script (for an operator, or pushed over
// SSH) and applied locally through netlink and /proc/sys. Whatever an apply
// adds is recorded in a journal on the real server, one line per change with
// the value it replaced, so that undo removes exactly what was added, even
// after the desired state has changed.
package arpguard
