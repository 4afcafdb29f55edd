package formats

import (
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

func TestKeepalivedCheckerKeptVerbatim(t *testing.T) {
	st, err := Import(FormatKeepalived, strings.NewReader(`virtual_server 198.18.0.1 80 {
  lb_kind DR
  real_server 198.18.0.11 80 {
    weight 2
    HTTP_GET {
      url {
        path "/a b"   # comment kept too
        status_code 200
      }
    }
  }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []ipvsmgr.ImportedKey{{Source: "keepalived", Line: 5, Scope: "virtual_server 198.18.0.1 80 real_server 198.18.0.11 80",
		Key: "HTTP_GET", Value: "HTTP_GET {\n  url {\n    path \"/a b\"   # comment kept too\n    status_code 200\n  }\n}"}}
	if d := cmp.Diff(want, st.Imported); d != "" {
		t.Error(d)
	}
	if rs := st.Services[0].Servers[0]; *rs.Weight != 2 || st.Services[0].Forwarding != "dr" {
		t.Errorf("mapping: %+v", st.Services[0])
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
		{"bad protocol", "virtual_server 198.18.0.1 80 {\n  protocol ICMP\n}\n", 2, "want TCP, UDP or SCTP"},
		{"bad scheduler", "virtual_server 198.18.0.1 80 {\n  lb_algo fastest\n}\n", 2, `"fastest" is not a scheduler`},
		{"bad weight", "virtual_server 198.18.0.1 80 {\n  real_server 198.18.0.2 80 {\n    weight heavy\n  }\n}\n", 3, `weight "heavy"`},
		{"weight range", "virtual_server 198.18.0.1 80 {\n  real_server 198.18.0.2 80 {\n    weight 70000\n  }\n}\n", 3, "70000 is out of range"},
		{"bad real server", "virtual_server 198.18.0.1 80 {\n  real_server rs1 80 {\n  }\n}\n", 2, "not an IP address"},
		{"dr port change", "virtual_server 198.18.0.1 80 {\n  lb_kind DR\n  real_server 198.18.0.2 8080 {\n  }\n}\n", 3, "dr forwarding cannot change the port"},
		{"flag", "virtual_server 198.18.0.1 80 {\n  lb_algo sh\n  lvs_flags sh-magic\n}\n", 3, `"sh-magic" is not a scheduler flag`},
		{"no block", "virtual_server 198.18.0.1 80\n", 1, "without a { ... } block"},
		{"too deep", strings.Repeat("a {\n", 40), 33, "nested deeper"},
		{"two values", "virtual_server 198.18.0.1 80 {\n  lb_algo rr wrr\n}\n", 2, "takes one value"},
	})
}
