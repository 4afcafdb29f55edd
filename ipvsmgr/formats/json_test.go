package formats

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const readmeDoc = `{
  "settings": {"network": "dr", "tcp_timeout": 0, "tcpfin_timeout": 0, "udp_timeout": 0},
  "services": [{
    "name": "web", "protocol": "tcp", "address": "198.18.0.100", "port": 80, "fwmark": 0,
    "interface": "eth0", "scheduler": "wlc", "scheduler_flags": [], "persistence": 0,
    "persistence_netmask": "", "forwarding": "dr", "enabled": true,
    "servers": [
      {"name": "r1", "address": "198.18.0.11", "port": 80, "weight": 1, "enabled": true},
      {"name": "r2", "address": "198.18.0.12", "port": 80, "weight": 3, "forwarding": "dr",
       "upper_threshold": 0, "lower_threshold": 0}
    ]
  }]
}
`

func TestImportJSONSamples(t *testing.T) {
	for _, p := range samples(t, "json") {
		t.Run(p, func(t *testing.T) { importFile(t, FormatJSON, p) })
	}
}

func TestJSONRoundTrip(t *testing.T) {
	st, err := Import(FormatJSON, strings.NewReader(readmeDoc))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Export(FormatJSON, st, &out); err != nil {
		t.Fatal(err)
	}
	back, err := Import(FormatJSON, &out)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(st, back, cmpopts.EquateEmpty()); d != "" {
		t.Error(d)
	}
}

func TestImportJSONErrors(t *testing.T) {
	checkErrors(t, FormatJSON, []errorCase{
		{"syntax", "{\n  \"services\": [\n    {\"address\": \"198.18.0.1\",, }\n  ]\n}\n", 3, "invalid character"},
		{"unknown field", "{\n  \"services\": [],\n  \"colour\": 1\n}\n", 3, `unknown field "colour"`},
		{"wrong type", "{\n  \"services\": [\n    {\"port\": \"80\"}\n  ]\n}\n", 3, "want int"},
		{"trailing data", "{\"services\": []}\n\n{}\n", 3, "trailing data"},
		{"empty", "", 1, "EOF"},
		{"invalid server", strings.Replace(readmeDoc, `"weight": 3`, `"weight": 70000`, 1), 9, "services[0].servers[1].weight: 70000 is out of range"},
		{"invalid service", strings.Replace(readmeDoc, `"scheduler": "wlc"`, `"scheduler": "fastest"`, 1), 5, "services[0].scheduler"},
		{"invalid setting", strings.Replace(readmeDoc, `"network": "dr"`, `"network": "fast"`, 1), 2, "settings.network"},
	})
}
