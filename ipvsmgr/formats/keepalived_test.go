package formats

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

func TestImportKeepalivedSamples(t *testing.T) {
	for _, p := range samples(t, "keepalived") {
		t.Run(p, func(t *testing.T) { importFile(t, FormatKeepalived, p) })
	}
}

func TestKeepalivedCheckerMapped(t *testing.T) {
	st, err := Import(FormatKeepalived, strings.NewReader(`virtual_server 198.18.0.1 80 {
  lb_kind DR
  real_server 198.18.0.11 80 {
    weight 2
    HTTP_GET {
      url {
        path "/a b"   # a comment
        status_code 200
        digest 9b3a0c85a887a256d6939da88aabd8cd
      }
    }
    SMTP_CHECK {
    }
  }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &ipvsmgr.Check{Type: "http", Interval: 60, Timeout: 5, Rise: 1, Fall: 2, StartHealthy: boolPtr(true),
		Path: "/a%20b", ExpectStatus: []int{200}}
	if d := cmp.Diff(want, st.Services[0].Check); d != "" {
		t.Errorf("check (-want +got):\n%s", d)
	}
	scope := "virtual_server 198.18.0.1 80 real_server 198.18.0.11 80"
	wantKept := []ipvsmgr.ImportedKey{
		{Source: "keepalived", Line: 9, Scope: scope + " HTTP_GET url", Key: "digest", Value: "9b3a0c85a887a256d6939da88aabd8cd"},
		{Source: "keepalived", Line: 12, Scope: scope, Key: "SMTP_CHECK", Value: "SMTP_CHECK {\n}"},
	}
	if d := cmp.Diff(wantKept, st.Imported); d != "" {
		t.Errorf("imported (-want +got):\n%s", d)
	}
	if rs := st.Services[0].Servers[0]; *rs.Weight != 2 || rs.Check != nil || st.Services[0].Forwarding != "dr" {
		t.Errorf("mapping: %+v", st.Services[0])
	}
}

// A setting of the virtual_server reaches every checker under it, the real
// server's overrides it, the checker's overrides both; servers whose checks
// differ keep one each.
func TestKeepalivedCheckSettingsInherited(t *testing.T) {
	st, err := Import(FormatKeepalived, strings.NewReader(`virtual_server 198.18.0.1 80 {
  delay_loop 4
  connect_timeout 3
  retry 4
  inhibit_on_failure
  alpha
  real_server 198.18.0.11 80 {
    TCP_CHECK {
    }
  }
  real_server 198.18.0.12 80 {
    delay_loop 2
    TCP_CHECK {
      retry 0
      connect_port 80
    }
  }
  real_server 198.18.0.13 80 {
  }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	svc := st.Services[0]
	if svc.Check != nil {
		t.Fatalf("checks differ, yet the service has one: %+v", svc.Check)
	}
	want := []*ipvsmgr.Check{
		{Type: "tcp", Interval: 4, Timeout: 3, Rise: 1, Fall: 5, OnFailure: "quiesce"},
		{Type: "tcp", Interval: 2, Timeout: 3, Rise: 1, Fall: 1, OnFailure: "quiesce"},
		nil, // no checker: always in, as in keepalived
	}
	for i, w := range want {
		if d := cmp.Diff(w, svc.Servers[i].Check); d != "" {
			t.Errorf("server %d (-want +got):\n%s", i, d)
		}
	}
	if len(st.Imported) != 0 {
		t.Errorf("every setting is mapped, yet kept: %+v", st.Imported)
	}
}

func TestKeepalivedQuorumIsAWeightSum(t *testing.T) {
	conf := func(w2 int) string {
		return fmt.Sprintf("virtual_server 198.18.0.1 80 {\n  protocol TCP\n  quorum 5\n  real_server 198.18.1.1 80 {\n weight 2\n }\n"+
			"  real_server 198.18.1.3 80 {\n weight 2\n }\n  real_server 198.18.1.2 80 {\n weight %d\n }\n}\n", w2)
	}
	st, err := Import(FormatKeepalived, strings.NewReader(conf(2)))
	if err != nil {
		t.Fatal(err)
	}
	if q := st.Services[0].Quorum; q != 3 || len(st.Imported) != 0 {
		t.Errorf("quorum 5 of weight-2 servers: want 3 servers, got %d (kept %+v)", q, st.Imported)
	}
	if st, err = Import(FormatKeepalived, strings.NewReader(conf(3))); err != nil {
		t.Fatal(err)
	}
	if q := st.Services[0].Quorum; q != 0 || len(st.Imported) != 1 || st.Imported[0].Key != "quorum" {
		t.Errorf("weights differ: the quorum is kept, not mapped; got quorum %d, kept %+v", q, st.Imported)
	}
}

func TestKeepalivedDefaultsToNAT(t *testing.T) {
	st, err := Import(FormatKeepalived, strings.NewReader("virtual_server 198.18.0.1 80 {\n real_server 198.18.1.1 8080 {\n }\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Services[0].Forwarding != "nat" {
		t.Errorf("keepalived's default forwarding method is NAT, got %q", st.Services[0].Forwarding)
	}
}

func TestImportKeepalivedErrors(t *testing.T) {
	checkErrors(t, FormatKeepalived, []errorCase{
		{"unclosed", "global_defs {\n  router_id a\n\nvirtual_server 198.18.0.1 80 {\n}\n", 1, "not closed"},
		{"stray brace", "global_defs {\n}\n}\n", 3, "closes no block"},
		{"bare brace", "{\n}\n", 1, "no keyword before it"},
		{"unterminated string", "virtual_server 198.18.0.1 80 {\n  virtualhost \"www\n}\n", 2, "unterminated"},
		{"bad address", "virtual_server www.example.com 80 {\n}\n", 1, "not an IP address"},
		{"bad port", "virtual_server 198.18.0.1 http {\n}\n", 1, `port "http"`},
		{"bad kind", "virtual_server 198.18.0.1 80 {\n  lb_kind FAST\n}\n", 2, "want DR, NAT or TUN"},
		{"bad scheduler", "virtual_server 198.18.0.1 80 {\n  lb_algo fastest\n  real_server 198.18.0.2 80 {\n  }\n}\n", 2, `"fastest" is not a scheduler`},
		{"bad weight", "virtual_server 198.18.0.1 80 {\n  real_server 198.18.0.2 80 {\n    weight heavy\n  }\n}\n", 3, `weight "heavy"`},
		{"weight range", "virtual_server 198.18.0.1 80 {\n  real_server 198.18.0.2 80 {\n    weight 70000\n  }\n}\n", 3, "70000 is out of range"},
		{"bad real server", "virtual_server 198.18.0.1 80 {\n  real_server rs1 80 {\n  }\n}\n", 2, "not an IP address"},
		{"flag", "virtual_server 198.18.0.1 80 {\n  lb_algo sh\n  lvs_flags sh-magic\n}\n", 3, `"sh-magic" is not a scheduler flag`},
		{"no block", "virtual_server 198.18.0.1 80\n", 1, "without a { ... } block"},
		{"real server no block", "virtual_server 198.18.0.1 80 {\n  real_server 198.18.0.2 80\n  real_server 198.18.0.3 80 {\n  }\n}\n", 2, "real_server without a { ... } block"},
		{"too deep", strings.Repeat("a {\n", 40), 33, "nested deeper"},
		{"two values", "virtual_server 198.18.0.1 80 {\n  lb_algo rr wrr\n}\n", 2, "takes one value"},
		{"connect_port", "virtual_server 198.18.0.1 80 {\n  real_server 198.18.0.2 80 {\n    TCP_CHECK {\n      connect_port http\n    }\n  }\n}\n", 4, `connect_port "http"`},
		{"port range", "virtual_server 198.18.0.1 80 {\n  real_server 198.18.0.2 80 {\n    TCP_CHECK {\n      connect_port 70000\n    }\n  }\n}\n", 4, "70000 is out of range"},
		{"status code", "virtual_server 198.18.0.1 80 {\n  real_server 198.18.0.2 80 {\n    HTTP_GET {\n      url {\n        status_code 200-700\n        path /\n      }\n    }\n  }\n}\n", 5, "within 100-599"},
		{"delay_loop", "virtual_server 198.18.0.1 80 {\n  delay_loop soon\n  real_server 198.18.0.2 80 {\n    TCP_CHECK {\n    }\n  }\n}\n", 2, `delay_loop "soon"`},
		{"interval range", "virtual_server 198.18.0.1 80 {\n  delay_loop 0.01\n  real_server 198.18.0.2 80 {\n    TCP_CHECK {\n    }\n  }\n}\n", 2, "out of range 0.1"},
		{"retry", "virtual_server 198.18.0.1 80 {\n  real_server 198.18.0.2 80 {\n    retry -1\n    TCP_CHECK {\n    }\n  }\n}\n", 3, `retry "-1"`},
		{"sorry server", "virtual_server 198.18.0.1 80 {\n  sorry_server backup 80\n  real_server 198.18.0.2 80 {\n  }\n}\n", 2, `sorry server "backup"`},
		{"typo in real_server", "virtual_server 198.18.0.1 80 {\n  real_server 198.18.0.2 80 {\n    weigth 1\n  }\n}\n", 3, `unknown keyword "weigth" in virtual_server 198.18.0.1 80 real_server 198.18.0.2 80`},
		{"typo checker", "virtual_server 198.18.0.1 80 {\n  real_server 198.18.0.2 80 {\n    SMTP_CHEKC {\n    }\n  }\n}\n", 3, `unknown keyword "SMTP_CHEKC"`},
		{"checker in checker", "virtual_server 198.18.0.1 80 {\n  real_server 198.18.0.2 80 {\n    HTTP_GET {\n      SMTP_CHECK {\n      }\n    }\n  }\n}\n", 4, `unknown keyword "SMTP_CHECK" in`},
		{"top-level typo", "virtual_sever 198.18.0.1 80 {\n}\n", 1, `unknown keyword "virtual_sever"`},
		{"non-breaking space", "virtual_server 198.18.0.1 80 {\n\u00a0\u00a0lb_kind DR\n  real_server 198.18.0.2 80 {\n  }\n}\n", 2, "U+00A0, which keepalived does not read as a blank"},
		{"unknown group", "virtual_server group G {\n  real_server 198.18.0.2 80 {\n  }\n}\n", 1, `no virtual_server_group of that name`},
		{"group range", "virtual_server_group G {\n  198.18.0.9-3 80\n}\n", 2, "not greater than"},
		{"include from a reader", "include /etc/keepalived/*.conf\n", 1, "included files are read only where they are"},
	})
}

// TestKeepalivedFixesAsKeepalived: what keepalived's validate_check_config
// fixes with a warning is fixed here with the same warning, on its line.
func TestKeepalivedFixesAsKeepalived(t *testing.T) {
	in := `global_defs {
  lvs_timeouts tcp 7200 tcpfin 120 udp 300
  lvs_sync_daemon eth1 VI_1 id 9
}
vrrp_instance VI_1 {
  interface eth0
  virtual_router_id 51
  advert_int 0.5
}
virtual_server 198.18.0.1 53 dev eth0.53 {
  lb_kind DR
  quorum 9
  real_server 198.18.1.1 5353 {
    TCP_CHECK {
      nb_get_retry 3
    }
  }
  real_server 198.18.1.1 5353 {
  }
  real_server 198.18.1.2 {
    HTTP_GET {
    }
  }
}
virtual_server 198.18.0.2 {
  protocol TCP
  real_server 198.18.1.3 80 {
  }
}
virtual_server 198.18.0.3 80 {
  protocol TCP
}
`
	st, rep, err := ImportWith(FormatKeepalived, strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range rep.Warnings {
		got = append(got, w.String())
	}
	want := []string{
		`line 10: virtual_server: "dev eth0.53" after 198.18.0.1 53 ignored, as keepalived does`,
		"line 15: Unknown keyword 'nb_get_retry' in TCP_CHECK - ignored, as keepalived ignores it (retry is the keyword)",
		"line 21: HTTP/SSL_GET checker has no urls specified - ignoring",
		"line 10: virtual server 198.18.0.1:53: no protocol set - defaulting to UDP",
		"line 10: virtual server 198.18.0.1:53: no scheduler set, setting default 'wlc'",
		"line 18: VS 198.18.0.1:53: real server 198.18.1.1:5353 is duplicated - removing second rs",
		"line 13: WARNING - virtual server 198.18.0.1:53 and real server 198.18.1.1:5353 ports don't match - resetting",
		"line 12: Warning - quorum 9 for virtual server 198.18.0.1:53 exceeds total weight of real servers 2, reducing quorum to 2",
		"line 25: virtual server 198.18.0.2:0: zero port only valid for persistent services - setting",
		"line 25: virtual server 198.18.0.2:0: no scheduler set, setting default 'wlc'",
		"line 25: virtual server 198.18.0.2:0: no forwarding method set, setting default NAT",
		"line 30: virtual server 198.18.0.3:80 has no real servers - ignoring",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("warnings (-want +got):\n%s", d)
	}
	if rep.Summary() != "2 virtual services, 3 real servers, 2 kept" {
		t.Errorf("summary %q", rep.Summary())
	}
	dns := st.Services[0]
	if dns.Protocol != "udp" || len(dns.Servers) != 2 || dns.Servers[0].Port != 0 || dns.Quorum != 2 {
		t.Errorf("service 0: %+v", dns)
	}
	if c := dns.Servers[0].Check; c == nil || c.Port != 5353 || c.Fall != 2 {
		t.Errorf("the TCP_CHECK connects to the port as written, retry not taken from nb_get_retry: %+v", c)
	}
	if s := st.Services[1]; s.Port != 0 || s.Persistence != defaultPersistence {
		t.Errorf("port-0 service: %+v", s)
	}
	wantSet := ipvsmgr.Settings{TCPTimeout: 7200, TCPFinTimeout: 120, UDPTimeout: 300,
		Redundancy: &ipvsmgr.Redundancy{VRID: 51, Interface: "eth0", AdvertInterval: 0.5, SyncDaemon: true, SyncInterface: "eth1", SyncID: 9}}
	if d := cmp.Diff(wantSet, st.Settings); d != "" {
		t.Errorf("settings (-want +got):\n%s", d)
	}
}

// TestKeepalivedDuplicateServerDropsItsKeys: keepalived frees a duplicate
// real server whole (validate_check_config), so what its block held is not
// kept either; the first server's kept keys stay (FuzzImportKeepalived
// seed 53e1a0c850c4e06f: a kept url of the second went on to the export,
// which had no HTTP_GET to write it in).
func TestKeepalivedDuplicateServerDropsItsKeys(t *testing.T) {
	in := `virtual_server 198.18.0.1 80 {
  protocol TCP
  real_server 198.18.1.1 80 {
    snmp_name a
  }
  real_server 198.18.1.1 80 {
    snmp_name b
    HTTP_GET {
      url {
        path /a
      }
      url {
        path /b
      }
    }
    SMTP_CHECK {
    }
  }
  real_server 198.18.1.2 80 {
    snmp_name c
  }
}
`
	st, rep, err := ImportWith(FormatKeepalived, strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Warnings, func(w Note) bool {
		return w.String() == "line 6: VS 198.18.0.1:80: real server 198.18.1.1:80 is duplicated - removing second rs"
	}) {
		t.Errorf("no duplicate warning on line 6: %v", rep.Warnings)
	}
	var kept []string
	for _, k := range st.Imported {
		kept = append(kept, fmt.Sprintf("%d %s: %s %s", k.Line, k.Scope, k.Key, k.Value))
	}
	want := []string{
		"4 virtual_server 198.18.0.1 80 real_server 198.18.1.1 80: snmp_name a",
		"20 virtual_server 198.18.0.1 80 real_server 198.18.1.2 80: snmp_name c",
	}
	if d := cmp.Diff(want, kept); d != "" {
		t.Errorf("kept (-want +got):\n%s", d)
	}
	if s := st.Services[0]; len(s.Servers) != 2 || s.Servers[0].Check != nil {
		t.Errorf("the first 198.18.1.1 is the one kept, with no check: %+v", s.Servers)
	}
}

// TestKeepalivedGroupsAndIncludes: a virtual_server group is one service
// per member with the group's servers; includes resolve from the including
// file's directory, with globs and braces.
func TestKeepalivedGroupsAndIncludes(t *testing.T) {
	files := map[string]string{
		"/etc/ka/keepalived.conf": "include conf.d/{a,b}.conf\ninclude nothing/*.conf\n",
		"/etc/ka/conf.d/a.conf":   "virtual_server_group G {\n  198.18.0.1-2 80\n  198.18.4.0/31 443\n  fwmark 7\n}\n",
		"/etc/ka/conf.d/b.conf":   "include sub/vs.conf\n",
		"/etc/ka/conf.d/sub/vs.conf": "virtual_server group G {\n  lb_kind DR\n  protocol TCP\n  real_server 198.18.1.1 80 {\n" +
			"    TCP_CHECK {\n    }\n  }\n  real_server 198.18.1.2 80 {\n    TCP_CHECK {\n    }\n  }\n}\n",
	}
	o := Options{
		Path: "/etc/ka/keepalived.conf",
		ReadFile: func(name string) ([]byte, error) {
			if s, ok := files[name]; ok {
				return []byte(s), nil
			}
			return nil, os.ErrNotExist
		},
		Glob: func(p string) ([]string, error) {
			var m []string
			for name := range files {
				if ok, _ := filepath.Match(p, name); ok {
					m = append(m, name)
				}
			}
			return m, nil
		},
	}
	st, rep, err := ImportWith(FormatKeepalived, strings.NewReader(files[o.Path]), o)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range st.Services {
		keys = append(keys, fmt.Sprintf("%s:%d/%d/%d", s.Address, s.Port, s.FWMark, len(s.Servers)))
		if s.Check == nil || s.Check.Type != "tcp" || (s.Port != 80 && s.Check.Port != 80) {
			t.Errorf("%s: the group's check is not shared: %+v", s.Address, s.Check)
		}
	}
	want := []string{"198.18.0.1:80/0/2", "198.18.0.2:80/0/2", "198.18.4.0:443/0/2", "198.18.4.1:443/0/2", ":0/7/2"}
	if d := cmp.Diff(want, keys); d != "" {
		t.Errorf("services (-want +got):\n%s", d)
	}
	if len(rep.Warnings) != 8 || rep.Warnings[0].Msg != "No config files matched '/etc/ka/nothing/*.conf'." ||
		rep.Warnings[2].File != "/etc/ka/conf.d/sub/vs.conf" || rep.Warnings[2].Line != 4 {
		t.Errorf("warnings: %+v", rep.Warnings)
	}
	for _, s := range st.Services {
		if s.Group != "G" {
			t.Errorf("%s:%d/%d: group %q, want G", s.Address, s.Port, s.FWMark, s.Group)
		}
	}
	if len(st.Imported) != 0 {
		t.Errorf("a group its services name is not kept as text: %+v", st.Imported)
	}
	// An error in an included file names the file and its line.
	files["/etc/ka/conf.d/sub/vs.conf"] = "virtual_server group G {\n  lb_kind FAST\n}\n"
	_, _, err = ImportWith(FormatKeepalived, strings.NewReader(files[o.Path]), o)
	if err == nil || err.Error() != `keepalived /etc/ka/conf.d/sub/vs.conf line 2: lb_kind "FAST": want DR, NAT or TUN` {
		t.Errorf("error in an included file: %v", err)
	}
}

func TestKeepalivedGroupRanges(t *testing.T) {
	for in, want := range map[string]string{
		"198.18.0.3-5":          "198.18.0.3 198.18.0.5",
		"198.18.0.3-198.18.1.2": "198.18.0.3 198.18.1.2",
		"2001:db8::a-f":         "2001:db8::a 2001:db8::f",
		"198.18.0.0/30":         "198.18.0.0 198.18.0.3",
		"2001:db8::/126":        "2001:db8:: 2001:db8::3",
		"198.18.0.9":            "198.18.0.9 198.18.0.9",
	} {
		first, last, err := kaRange(in)
		if err != nil || first.String()+" "+last.String() != want {
			t.Errorf("%s: got %v %v %v, want %s", in, first, last, err, want)
		}
	}
	for _, bad := range []string{"198.18.0.5-3", "198.18.0.1/30", "198.18.0.1-2001:db8::1", "x-3", "198.18.0.1-300"} {
		if _, _, err := kaRange(bad); err == nil {
			t.Errorf("%s: want an error", bad)
		}
	}
}

func TestKeepalivedTunnelTypes(t *testing.T) {
	st, err := Import(FormatKeepalived, strings.NewReader(`virtual_server 198.18.0.1 443 {
  protocol TCP
  lvs_method TUN type gue port 6080 csum
  real_server 198.18.1.1 443 {
  }
  real_server 198.18.1.2 443 {
    lvs_method TUN type gre
  }
  real_server 198.18.1.3 443 {
    lvs_method TUN
  }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rs := range st.Services[0].Servers {
		got = append(got, fmt.Sprintf("%s/%d/%s", rs.Tunnel, rs.TunnelPort, rs.TunnelChecksum))
	}
	if d := cmp.Diff([]string{"gue/6080/csum", "gre/0/", "/0/"}, got); d != "" {
		t.Errorf("tunnels (-want +got):\n%s", d)
	}
	checkErrors(t, FormatKeepalived, []errorCase{
		{"tunnel word", "virtual_server 198.18.0.1 443 {\n  lvs_method TUN type gue port x\n  real_server 198.18.1.1 443 {\n  }\n}\n", 2, `port "x" is not a number`},
		{"DR with words", "virtual_server 198.18.0.1 443 {\n  lvs_method DR type gue\n  real_server 198.18.1.1 443 {\n  }\n}\n", 2, "takes one value"},
	})
}

// A word that would be read otherwise at a line's start (a conditional, a
// definition), after another statement of a mapped block's line: keepalived
// takes it for an unknown keyword; the import warns and does not keep it, so
// that the export does not write it on a line of its own.
func TestKeepalivedLineStartWordsAfterAStatement(t *testing.T) {
	in := "global_defs {\n notification_email { ops@example.test } @x\n smtp_server 198.18.0.9\n other { } $A=1\n}\n"
	st, rep, err := ImportWith(FormatKeepalived, strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	for _, w := range rep.Warnings {
		if strings.Contains(w.Msg, "after another on its line") {
			warned = append(warned, w.String())
		}
	}
	if len(warned) != 2 || !strings.HasPrefix(warned[0], "line 2: global_defs: unknown keyword \"@x\"") || !strings.HasPrefix(warned[1], "line 4: global_defs: unknown keyword \"$A=1\"") {
		t.Errorf("warnings: %q", warned)
	}
	for _, k := range st.Imported {
		if strings.Contains(k.Value, "@x") || strings.Contains(k.Value, "$A") {
			t.Errorf("kept %q", k.Value)
		}
	}
	roundTrip(t, FormatKeepalived, st)
}
