package formats

import (
	"fmt"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// keepalived.conf: the virtual_server and real_server blocks become services
// and servers, their checkers checks (keepalived_check.go), a
// virtual_server_group one service per address, range member and fwmark
// (keepalived_group.go); includes are read as keepalived reads them
// (keepalived_include.go), after keepalived's preprocessor (definitions,
// conditional lines: keepalived_pre.go). What keepalived fixes with a warning (a DR port
// that differs, a duplicate real server, a quorum above the weights...)
// ipvsctl fixes with the same warning (keepalived_fix.go). Everything else
// keepalived knows (global_defs, vrrp_instance, hysteresis, a digest...) is
// kept in State.Imported: a block as one entry whose value is its text, a
// statement as its keyword and arguments. A keyword keepalived does not know
// is an error (keepalived logs "Unknown keyword" and runs without it).

var kaForwarding = map[string]string{"DR": "dr", "NAT": "nat", "TUN": "tun"}

type kaImporter struct {
	*importer
	st     *ipvsmgr.State
	lines  lineIndex
	groups map[string]*kaGroup
	// used are the groups a virtual_server names: their services carry
	// the group's name (Service.Group), so their text is not kept.
	used map[string]bool
	// trackFiles are the track_file blocks, by name, for FILE_CHECK.
	trackFiles map[string]*kaNode
	// defs is the global_defs block being mapped.
	defs *kaNode
}

func (k *kaImporter) errf(line int, format string, args ...any) error {
	return &ParseError{Format: FormatKeepalived, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// keep records n as it is written: a block with its text, a statement with
// its arguments.
func (k *kaImporter) keep(scope string, n *kaNode) {
	key, value := n.word(0), n.rest()
	if n.block {
		key, value = n.header(), n.text()
	}
	k.st.Imported = append(k.st.Imported, ipvsmgr.ImportedKey{Source: FormatKeepalived, Line: n.line, Scope: scope, Key: key, Value: value})
}

// kaTopLevel are the blocks and statements keepalived knows outside a
// virtual_server (its *_parser.c install_keyword_root calls); they are kept.
var kaTopLevel = words("SSL bfd_instance child_wait_time garp_group global_defs instance interface_up_down_delays " +
	"linkbeat_interfaces linkbeat_use_polling namespace_with_ipsets net_namespace net_namespace_ipvs static_ipaddress " +
	"static_routes static_rules track_file track_group use_pid_dir vrrp_instance vrrp_script vrrp_sync_group " +
	"vrrp_track_file vrrp_track_process vrrp_sync_group")

func parseKeepalived(data []byte, im *importer) (*ipvsmgr.State, lineIndex, error) {
	k := &kaImporter{importer: im, st: &ipvsmgr.State{Services: []ipvsmgr.Service{}}, lines: lineIndex{}, groups: map[string]*kaGroup{}}
	id := im.opts.ConfigID
	if id == "" {
		id = defaultConfigID()
	}
	pre := newKaPre(k, id)
	if err := pre.file(data, im.opts.Path, 0, 0); err != nil {
		return nil, nil, err
	}
	nodes, err := parseKeepalivedTree(pre.out.Bytes(), pre.lines)
	if err != nil {
		return nil, nil, err
	}
	// keepalived links a virtual_server to its group once all is read: a
	// group may come after the virtual_server that names it.
	k.used, k.trackFiles = map[string]bool{}, map[string]*kaNode{}
	for _, n := range nodes {
		if n.word(0) == "virtual_server" && n.word(1) == "group" {
			k.used[n.word(2)] = true
		}
		if (n.word(0) == "track_file" || n.word(0) == "vrrp_track_file") && n.block && k.trackFiles[n.word(1)] == nil {
			k.trackFiles[n.word(1)] = n
		}
	}
	for _, n := range nodes {
		if n.word(0) == "virtual_server_group" {
			if err := k.group(n); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, n := range nodes {
		if n.word(0) == "global_defs" && n.block {
			if err := k.globalDefs(n); err != nil {
				return nil, nil, err
			}
			continue
		}
		if err := k.topLevel(n); err != nil {
			return nil, nil, err
		}
	}
	// The VRRP side once the services are read: the instance's VIPs are
	// their addresses; the sync daemon and the mail settings then.
	if err := k.vrrpInstance(nodes); err != nil {
		return nil, nil, err
	}
	for _, n := range nodes {
		if n.word(0) == "global_defs" && n.block {
			k.defs = n
			k.smtpDefs(n)
			for _, c := range n.children {
				if c.word(0) == "lvs_sync_daemon" {
					k.lvsSyncDaemon(c, nodes)
				}
			}
		}
	}
	return k.st, k.lines, nil
}

func (k *kaImporter) topLevel(n *kaNode) error {
	kw := n.word(0)
	switch {
	case kw == "virtual_server":
		return k.virtualServer(n)
	case kw == "virtual_server_group":
		// Read first. A group no virtual_server names is kept as written;
		// a named one lives on in its services' group.
		if !k.used[n.word(1)] {
			k.keep("", n)
		}
		return nil
	case kaTopLevel()[kw]:
		k.keep("", n)
		return nil
	}
	return k.unknownKeyword("", n)
}

// unknownKeyword refuses a keyword keepalived does not know in scope, or
// notes it under --ignore-unknown.
func (k *kaImporter) unknownKeyword(scope string, n *kaNode) error {
	where := ""
	if scope != "" {
		where = " in " + scope
	}
	kw := n.word(0)
	if i := strings.IndexFunc(kw, isOddSpace); i >= 0 {
		r := []rune(kw[i:])[0]
		return k.unknown(n.line, "unknown keyword %q%s: it holds U+%04X, which keepalived does not read as a blank (only space, tab, \\f, \\v and \\r are)", kw, where, r)
	}
	return k.unknown(n.line, "unknown keyword %q%s", kw, where)
}

// isOddSpace is a Unicode blank that keepalived's tokenizer (WHITE_SPACE in
// lib/parser.c: " \t\f\n\r\v") takes as part of a word.
func isOddSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\f', '\n', '\r', '\v':
		return false
	}
	return r == 0x85 || r == 0xa0 || r == 0x1680 || (r >= 0x2000 && r <= 0x200b) || r == 0x2028 || r == 0x2029 ||
		r == 0x202f || r == 0x205f || r == 0x3000 || r == 0xfeff
}

func (k *kaImporter) arg(n *kaNode) (string, error) {
	if len(n.words) != 2 {
		return "", k.errf(n.line, "%s takes one value, got %d", n.word(0), len(n.words)-1)
	}
	return n.word(1), nil
}
