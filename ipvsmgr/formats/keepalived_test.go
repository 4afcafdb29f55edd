package formats

import (
	"fmt"
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
