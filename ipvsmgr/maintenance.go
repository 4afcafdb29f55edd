package ipvsmgr

import (
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
)

// Maintenance is what settings.maintenance_dir held when the daemon last
// read it (ldirectord's maintenancedir): a real server named by a file
// there is quiesced in every service (weight 0: no new connection, the
// established ones go on) until the file goes. It is observed, like health:
// laid over the desired state (HealthView.Maintenance), never stored.
type Maintenance struct {
	Dir string
	// Files are the file names by what they hold out: an address and port,
	// or an address (Port 0: any port).
	Files map[DestKey]string
}

func (m *Maintenance) empty() bool { return m == nil || len(m.Files) == 0 }

// File is the path of the file that holds k out, "" when none does.
func (m *Maintenance) File(k DestKey) string {
	if m.empty() {
		return ""
	}
	name, ok := m.Files[k]
	if !ok {
		if name, ok = m.Files[DestKey{Addr: k.Addr}]; !ok {
			return ""
		}
	}
	return filepath.Join(m.Dir, name)
}

// ParseMaintenanceName reads a maintenance file's name as ldirectord
// matches it: an address (IPv6 bare or in brackets), address:port
// ([IPv6]:port), or a host name, with or without :port (host is set: the
// caller resolves it). ok is false for a name that is none of these.
func ParseMaintenanceName(name string) (addr netip.Addr, port uint16, host string, ok bool) {
	if a, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil && (!strings.HasPrefix(name, "[") || strings.HasSuffix(name, "]")) {
		return a.Unmap(), 0, "", true
	}
	i := strings.LastIndexByte(name, ':')
	base := name
	if i >= 0 {
		p, err := strconv.ParseUint(name[i+1:], 10, 16)
		if err != nil || p == 0 {
			return netip.Addr{}, 0, "", false
		}
		base, port = name[:i], uint16(p)
	}
	if strings.HasPrefix(base, "[") {
		a, err := netip.ParseAddr(strings.TrimSuffix(base[1:], "]"))
		if err != nil || !strings.HasSuffix(base, "]") || !a.Is6() {
			return netip.Addr{}, 0, "", false
		}
		return a, port, "", true
	}
	if a, err := netip.ParseAddr(base); err == nil && a.Is4() {
		return a, port, "", true
	}
	if base == "" || !validDNSName(base) || strings.Contains(base, ":") {
		return netip.Addr{}, 0, "", false
	}
	return netip.Addr{}, port, base, true
}
