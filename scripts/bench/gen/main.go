// Command gen writes the benchmark's table in three forms: an ipvsctl state
// document, an `ipvsadm -R` script and a keepalived.conf, all describing the
// same N services x M real servers (DR, wlc), plus the state with one weight
// changed.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

func main() {
	out := flag.String("out", ".", "output directory")
	nsvc := flag.Int("services", 1000, "virtual services")
	nrs := flag.Int("servers", 10, "real servers per service")
	flag.Parse()
	base := netip.MustParseAddr("198.18.100.0")
	st := ipvsmgr.State{Settings: ipvsmgr.Settings{Network: "dr"}}
	var ipvsadm, keep strings.Builder
	keep.WriteString("global_defs {\n  router_id bench\n}\n")
	vip := base
	for i := range *nsvc {
		vip = vip.Next()
		svc := ipvsmgr.Service{Name: fmt.Sprintf("s%d", i), Protocol: "tcp", Address: vip.String(), Port: 80, Scheduler: "wlc"}
		fmt.Fprintf(&ipvsadm, "-A -t %s:80 -s wlc\n", vip)
		fmt.Fprintf(&keep, "virtual_server %s 80 {\n  lb_algo wlc\n  lb_kind DR\n  protocol TCP\n", vip)
		for j := range *nrs {
			rip := fmt.Sprintf("198.18.0.%d", 11+j)
			w := 1
			svc.Servers = append(svc.Servers, ipvsmgr.Server{Address: rip, Port: 80, Weight: &w})
			fmt.Fprintf(&ipvsadm, "-a -t %s:80 -r %s:80 -g -w 1\n", vip, rip)
			fmt.Fprintf(&keep, "  real_server %s 80 {\n    weight 1\n  }\n", rip)
		}
		keep.WriteString("}\n")
		st.Services = append(st.Services, svc)
	}
	write(*out, "state.json", st)
	w := 5
	target := st.Services[len(st.Services)/2]
	srv := target.Servers
	srv[len(srv)/2].Weight = &w
	write(*out, "state-weight.json", st)
	// The service and real server whose weight the benchmark changes.
	mustWrite(filepath.Join(*out, "weight-target"), fmt.Sprintf("%s %s:%d\n", target.Name, srv[len(srv)/2].Address, srv[len(srv)/2].Port))
	mustWrite(filepath.Join(*out, "rules.ipvsadm"), ipvsadm.String())
	mustWrite(filepath.Join(*out, "keepalived.conf"), keep.String())
	mustWrite(filepath.Join(*out, "entries"), fmt.Sprint(*nsvc+*nsvc**nrs))
}

func write(dir, name string, st ipvsmgr.State) {
	b, err := json.Marshal(st)
	if err != nil {
		log.Fatal(err)
	}
	mustWrite(filepath.Join(dir, name), string(b))
}

func mustWrite(path, s string) {
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		log.Fatal(err)
	}
}
