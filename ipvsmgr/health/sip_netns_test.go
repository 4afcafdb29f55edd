package health

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// TestSIPCheckAgainstKamailio: Kamailio (Debian's kamailio; bookworm has
// no sipp) as the SIP server, over UDP and TCP, answering OPTIONS for
// sip:monitor with 200 and anything else with 404.
func TestSIPCheckAgainstKamailio(t *testing.T) {
	needServer(t, "kamailio", "kamailio")
	t.Parallel()
	ns, addr := serverNetns(t)
	dir := serverDir(t)
	conf := filepath.Join(dir, "kamailio.cfg")
	writeFile(t, conf, fmt.Sprintf(`#!KAMAILIO
listen=udp:%[1]s:5060
listen=tcp:%[1]s:5060
children=1
tcp_children=1
loadmodule "sl.so"
loadmodule "pv.so"
request_route {
	if (method == "OPTIONS" && $rU == "monitor") {
		sl_send_reply("200", "OK");
		exit;
	}
	sl_send_reply("404", "Not Here");
}
`, addr), 0o644)
	d := startDaemon(t, ns, dir, "kamailio", "kamailio", "-DD", "-E", "-f", conf, "-Y", dir, "-P", filepath.Join(dir, "kamailio.pid"),
		"-m", "16", "-M", "4", "-w", dir)
	for _, proto := range []string{"udp", "tcp"} {
		spec := ipvsmgr.CheckSpec{Type: "sip", Target: netip.AddrPortFrom(addr, 5060), Login: "monitor@" + addr.String(), Protocol: proto}
		waitPass(t, ns, d, spec)
		if r := runIn(t, ns, spec); r.Reason != "SIP 200 OK" {
			t.Errorf("sip over %s: %q, want SIP 200 OK", proto, r.Reason)
		}
		other := spec
		other.Login = "nobody@" + addr.String()
		wantFail(t, ns, other, "SIP 404 Not Here, want 200")
	}
	d.stop(t)
	wantFail(t, ns, ipvsmgr.CheckSpec{Type: "sip", Target: netip.AddrPortFrom(addr, 5060), Login: "monitor", Protocol: "udp"}, "connection refused")
	wantFail(t, ns, ipvsmgr.CheckSpec{Type: "sip", Target: netip.AddrPortFrom(addr, 5060), Login: "monitor", Protocol: "tcp"}, "connection refused")
}
