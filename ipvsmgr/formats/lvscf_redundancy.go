package formats

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Piranha's director-pair keys and settings.redundancy. pulse sends a
// unicast heartbeat between `primary` and `backup` every `keepalive` seconds
// and takes over after `deadtime`; VRRP to the same two addresses (peers)
// every advert interval does that, and declares the master dead after three
// adverts plus a skew. Piranha has no VRID: ipvsctl writes a non-default one
// as vrrp_vrid.

// lvsRedundancyKeys are the top-level keys settings.redundancy takes up.
var lvsRedundancyKeys = []string{"primary", "backup", "backup_active", "heartbeat", "keepalive", "deadtime",
	"monitor_links", "syncdaemon", "syncd_iface", "syncd_id", "vrrp_vrid"}

// defaultLVSVRID is the VRID an lvs.cf pair gets (keepalived's usual one).
const defaultLVSVRID = 51

// mapRedundancy turns the pair keys into settings.redundancy when the file
// runs a backup director (backup_active = 1, heartbeat not off) and names
// both directors; the keys it takes leave st.Imported. Otherwise they stay
// there, as before.
func (p *lvsParser) mapRedundancy() error {
	keys := map[string]ipvsmgr.ImportedKey{}
	for _, k := range p.st.Imported {
		if k.Scope == "" && slices.Contains(lvsRedundancyKeys, k.Key) {
			keys[k.Key] = k
		}
	}
	r := lvsPairPeers(keys)
	if r == nil {
		return nil
	}
	taken := []string{"primary", "backup", "backup_active", "heartbeat"}
	numbers, err := p.lvsPairNumbers(r, keys)
	if err != nil {
		return err
	}
	taken = append(taken, numbers...)
	taken = append(taken, p.lvsPairLinks(r, keys)...)
	p.st.Settings.Redundancy = r
	p.lines["settings.redundancy"] = keys["backup_active"].Line
	p.lines["settings.redundancy.unicast_peers[0]"] = keys["primary"].Line
	p.lines["settings.redundancy.unicast_peers[1]"] = keys["backup"].Line
	for field, key := range map[string]string{"advert_interval": "keepalive", "vrid": "vrrp_vrid", "sync_interface": "syncd_iface", "sync_id": "syncd_id"} {
		if k, ok := keys[key]; ok {
			p.lines["settings.redundancy."+field] = k.Line
		}
	}
	p.st.Imported = slices.DeleteFunc(p.st.Imported, func(k ipvsmgr.ImportedKey) bool {
		return k.Scope == "" && slices.Contains(taken, k.Key)
	})
	return nil
}

// lvsPairPeers is the pair the keys run, with its two directors as peers,
// or nil when they run no backup director or do not name both.
func lvsPairPeers(keys map[string]ipvsmgr.ImportedKey) *ipvsmgr.Redundancy {
	val := func(key string) string { return unquote(keys[key].Value) }
	if val("backup_active") != "1" || val("heartbeat") == "0" {
		return nil
	}
	primary, err1 := netip.ParseAddr(val("primary"))
	backup, err2 := netip.ParseAddr(val("backup"))
	if err1 != nil || err2 != nil || primary.IsUnspecified() || backup.IsUnspecified() || primary.Is4() != backup.Is4() {
		return nil
	}
	return &ipvsmgr.Redundancy{VRID: defaultLVSVRID, UnicastPeers: []string{primary.String(), backup.String()}}
}

// lvsPairNumbers reads the pair's timers and ids (keepalive, with a
// deadtime of three of them, vrrp_vrid, syncd_id) and says which keys it took.
func (p *lvsParser) lvsPairNumbers(r *ipvsmgr.Redundancy, keys map[string]ipvsmgr.ImportedKey) ([]string, error) {
	var taken []string
	number := func(key string, lo, hi float64) (float64, error) {
		k := keys[key]
		f, err := strconv.ParseFloat(unquote(k.Value), 64)
		if err != nil || f < lo || f > hi {
			p.line = k.Line
			return 0, p.errf("%s %q: want a number %v..%v", key, k.Value, lo, hi)
		}
		taken = append(taken, key)
		return f, nil
	}
	var err error
	if _, ok := keys["keepalive"]; ok {
		if r.AdvertInterval, err = number("keepalive", 0.01, 40.95); err != nil {
			return nil, err
		}
		if d, ok := keys["deadtime"]; ok {
			if f, err := strconv.ParseFloat(unquote(d.Value), 64); err == nil && math.Abs(f-3*r.AdvertInterval) < 1e-9 {
				taken = append(taken, "deadtime")
			}
		}
	}
	if _, ok := keys["vrrp_vrid"]; ok {
		vrid, err := number("vrrp_vrid", 1, 255)
		if err != nil {
			return nil, err
		}
		r.VRID = int(vrid)
	}
	if _, ok := keys["syncd_id"]; ok {
		id, err := number("syncd_id", 0, 255)
		if err != nil {
			return nil, err
		}
		r.SyncID = int(id)
	}
	return taken, nil
}

// lvsPairLinks sets the pair's interfaces (the virtual services' first,
// else syncd_iface, else eth0), its tracked links and its sync daemon, and
// says which keys it took.
func (p *lvsParser) lvsPairLinks(r *ipvsmgr.Redundancy, keys map[string]ipvsmgr.ImportedKey) []string {
	var taken []string
	var serviceIfs []string
	for _, svc := range p.st.Services {
		if svc.Interface != "" && !slices.Contains(serviceIfs, svc.Interface) {
			serviceIfs = append(serviceIfs, svc.Interface)
		}
	}
	if len(serviceIfs) > 0 {
		r.Interface = serviceIfs[0]
	}
	switch unquote(keys["monitor_links"].Value) {
	case "1":
		// pulse watched the links of the virtual services' interfaces.
		if len(serviceIfs) > 0 {
			r.TrackInterfaces = serviceIfs
			taken = append(taken, "monitor_links")
		}
	case "0":
		taken = append(taken, "monitor_links")
	}
	switch unquote(keys["syncdaemon"].Value) {
	case "1":
		r.SyncDaemon = true
		taken = append(taken, "syncdaemon")
	case "0":
		taken = append(taken, "syncdaemon")
	}
	if k, ok := keys["syncd_iface"]; ok {
		r.SyncInterface = unquote(k.Value)
		taken = append(taken, "syncd_iface")
	}
	if r.Interface == "" {
		r.Interface = r.SyncInterface
	}
	if r.Interface == "" {
		r.Interface = "eth0"
	}
	return taken
}

// lvsRedundancyValues are the pair keys settings.redundancy writes, and the
// keys an imported value of which takes precedence (what the import could
// not map).
func lvsRedundancyValues(r *ipvsmgr.Redundancy) (vals map[string]string, weak []string, err error) {
	if r == nil {
		return nil, nil, nil
	}
	if len(r.UnicastPeers) != 2 {
		return nil, nil, fmt.Errorf("export lvs.cf: Piranha names one primary and one backup director: settings.redundancy.unicast_peers needs their two addresses, has %d", len(r.UnicastPeers))
	}
	adv := r.Advert().Seconds()
	vals = map[string]string{
		"primary": r.UnicastPeers[0], "backup": r.UnicastPeers[1], "backup_active": "1", "heartbeat": "1",
		"keepalive": strconv.FormatFloat(adv, 'f', -1, 64), "deadtime": strconv.FormatFloat(3*adv, 'f', -1, 64),
		"monitor_links": activeValue(len(r.TrackInterfaces) > 0), "syncdaemon": activeValue(r.SyncDaemon),
	}
	if r.SyncInterface != "" {
		vals["syncd_iface"] = r.SyncInterface
	}
	if r.SyncID != 0 {
		vals["syncd_id"] = strconv.Itoa(r.SyncID)
	}
	if r.VRID != defaultLVSVRID {
		vals["vrrp_vrid"] = strconv.Itoa(r.VRID)
	}
	return vals, []string{"deadtime", "monitor_links"}, nil
}
