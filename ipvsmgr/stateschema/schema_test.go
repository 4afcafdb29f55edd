package stateschema_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/formats"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/stateschema"
)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(stateschema.JSON))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("state.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("state.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func schemaCheck(t *testing.T, sch *jsonschema.Schema, doc []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// corpus is every state document the tests hold, as the model exports it:
// the importers' results (and their samples' and real configurations'
// imports), the lab's state, the store's release document.
func corpus(t *testing.T) map[string]*ipvsmgr.State {
	t.Helper()
	out := map[string]*ipvsmgr.State{}
	var docs []string
	for _, pattern := range []string{"../formats/testdata/*/*.json", "../../scripts/lab/state.json", "../../server/store/testdata/*.json"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, m...)
	}
	for _, p := range docs {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		st, err := ipvsmgr.DecodeState(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[p] = st
	}
	// The real configurations of formats/testdata/corpus that import.
	for dir, format := range map[string]string{"keepalived": formats.FormatKeepalived, "lvs.cf": formats.FormatLVSCF, "ipvsadm": formats.FormatIpvsadm} {
		reports, err := filepath.Glob(filepath.Join("../formats/testdata/corpus", dir, "*.report"))
		if err != nil {
			t.Fatal(err)
		}
		for _, rep := range reports {
			p := strings.TrimSuffix(rep, ".report")
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			st, _, err := formats.ImportWith(format, bytes.NewReader(data), rooted(p))
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			out[p] = st
		}
	}
	if len(out) < 40 {
		t.Fatalf("only %d corpus documents found", len(out))
	}
	return out
}

// rooted reads a keepalived include under the sample's root/ folder.
func rooted(path string) formats.Options {
	root, _ := filepath.Abs(filepath.Join(filepath.Dir(path), "root"))
	local := func(name string) string {
		if filepath.IsAbs(name) {
			return filepath.Join(root, name)
		}
		return name
	}
	return formats.Options{Path: path,
		ReadFile: func(name string) ([]byte, error) { return os.ReadFile(local(name)) },
		Glob: func(pattern string) ([]string, error) {
			m, err := filepath.Glob(local(pattern))
			for i := range m {
				if filepath.IsAbs(pattern) {
					m[i] = strings.TrimPrefix(m[i], root)
				}
			}
			return m, err
		}}
}

// Every state of the test corpus, exported by the model (json.Marshal of
// ipvsmgr.State, as `ipvsctl export` writes it), is valid by the schema; so
// is the design document with an editor's "$schema" key.
func TestCorpusExportsValidate(t *testing.T) {
	sch := compileSchema(t)
	docs := corpus(t)
	t.Logf("%d corpus documents", len(docs))
	for p, st := range docs {
		var b bytes.Buffer
		if err := formats.Export(formats.FormatJSON, st, &b); err != nil {
			t.Fatalf("%s: export: %v", p, err)
		}
		if err := schemaCheck(t, sch, b.Bytes()); err != nil {
			t.Errorf("%s: the export is refused by the schema: %v", p, err)
		}
	}
	withKey := []byte(`{"$schema":"https://example.org/state.schema.json","services":[]}`)
	if err := schemaCheck(t, sch, withKey); err != nil {
		t.Errorf("$schema key refused: %v", err)
	}
	if _, err := ipvsmgr.DecodeState(bytes.NewReader(withKey)); err != nil {
		t.Errorf("$schema key refused by the decoder: %v", err)
	}
}

type broken struct {
	constraint string // the constraints entry (or the kind of check) it breaks
	doc        string
	field      string // the validator's problem: its field, a part of its message
	msg        string
}

func svc(extra string) string {
	return `{"services":[{"address":"198.18.0.1","port":80` + extra + `,"servers":[{"address":"198.18.0.11"}]}]}`
}

func srv(extra string) string {
	return `{"services":[{"address":"198.18.0.1","port":80,"forwarding":"tun","servers":[{"address":"198.18.0.11"` + extra + `}]}]}`
}

func chk(typ, extra string) string {
	return `{"services":[{"address":"198.18.0.1","port":80,"check":{"type":"` + typ + `"` + extra + `},"servers":[{"address":"198.18.0.11"}]}]}`
}

func settings(s string) string { return `{"settings":{` + s + `},"services":[]}` }

func vrrp(extra string) string {
	return settings(`"redundancy":{"vrid":1,"interface":"eth0"` + extra + `}`)
}

func vrrpAuth(extra string) string {
	return vrrp(`,"auth":{"keys":[{"id":1,"file":"/etc/ipvsctl/vrrp.key"}]` + extra + `}`)
}

func bgp(extra, peer string) string {
	return settings(`"bgp":{"asn":65001,"peers":[{"address":"198.18.1.1","asn":65000` + peer + `}]` + extra + `}`)
}

// brokenDocs are documents the validator refuses for a type, a range or an
// enum: validate_test.go's cases of that kind first, then one for each
// constraint the schema carries.
var brokenDocs = []broken{
	// From TestValidationNamesFieldAndValue.
	{"Service.port", `{"services":[{"address":"198.18.0.1","port":65536,"servers":[]}]}`, "services[0].port", "65536 is out of range"},
	{"Service.scheduler", svc(`,"scheduler":"fastest"`), "services[0].scheduler", `"fastest" is not a scheduler`},
	{"Service.scheduler_flags", svc(`,"scheduler":"sh","scheduler_flags":["sticky"]`), "services[0].scheduler_flags[0]", `"sticky" is not a flag of scheduler sh`},
	{"Service.protocol", svc(`,"protocol":"icmp"`), "services[0].protocol", `"icmp" is not a protocol`},
	{"Service.forwarding", svc(`,"forwarding":"direct"`), "services[0].forwarding", `"direct" is not a forwarding method`},
	{"Service.persistence", svc(`,"persistence":-1`), "services[0].persistence", "-1 is out of range"},
	{"Server.weight", `{"services":[{"address":"198.18.0.1","port":80,"servers":[{"address":"198.18.0.11","weight":65536}]}]}`, "services[0].servers[0].weight", "65536 is out of range 0..65535"},
	{"Match.ports", `{"services":[{"fwmark":3,"address":"198.18.0.1","match":[{"protocol":"tcp","ports":[0]}],"servers":[]}]}`, "services[0].match[0].ports[0]", "0 is out of range 1..65535"},
	{"Service.interface", svc(`,"interface":"eth0/1"`), "services[0].interface", `"eth0/1" is not an interface name`},
	{"Settings.tcp_timeout", `{"settings":{"tcp_timeout":-5},"services":[]}`, "settings.tcp_timeout", "-5 is out of range"},
	{"unknown field", `{"services":[{"address":"198.18.0.1","port":80,"weight":3,"servers":[]}]}`, "document", `unknown field "weight"`},
	{"type", "{\"services\":[\n{\"address\":\"198.18.0.1\",\"port\":\"80\",\"servers\":[]}]}", "document", `field "services.port"`},
	// One per constraint.
	{"Settings.network", settings(`"network":"ecmp"`), "settings.network", "not a forwarding method"},
	{"Settings.tcpfin_timeout", settings(`"tcpfin_timeout":2147484`), "settings.tcpfin_timeout", "out of range"},
	{"Settings.udp_timeout", settings(`"udp_timeout":-1`), "settings.udp_timeout", "out of range"},
	{"Settings.retire_timeout", settings(`"retire_timeout":604801`), "settings.retire_timeout", "out of range"},
	{"Redundancy.vrid", settings(`"redundancy":{"vrid":256,"interface":"eth0"}`), "settings.redundancy.vrid", "out of range"},
	{"Redundancy.interface", settings(`"redundancy":{"vrid":1,"interface":"a:b"}`), "settings.redundancy.interface", "not an interface name"},
	{"Redundancy.interface", settings(`"redundancy":{"vrid":1,"interface":".."}`), "settings.redundancy.interface", "not an interface name"},
	{"Redundancy.advert_interval", vrrp(`,"advert_interval":41`), "settings.redundancy.advert_interval", "out of range"},
	{"Redundancy.preempt_delay", vrrp(`,"preempt_delay":1001`), "settings.redundancy.preempt_delay", "out of range"},
	{"Redundancy.preempt_sync_wait", vrrp(`,"preempt_sync_wait":3601`), "settings.redundancy.preempt_sync_wait", "out of range"},
	{"Redundancy.sync_interface", vrrp(`,"sync_interface":"a b"`), "settings.redundancy.sync_interface", "not an interface name"},
	{"Redundancy.sync_id", vrrp(`,"sync_id":256`), "settings.redundancy.sync_id", "out of range"},
	{"Redundancy.track_interfaces", vrrp(`,"track_interfaces":["eth0","a/b"]`), "settings.redundancy.track_interfaces[1]", "not an interface name"},
	{"Redundancy.garp_count", vrrp(`,"garp_count":1001`), "settings.redundancy.garp_count", "out of range"},
	{"Redundancy.garp_repeat_delay", vrrp(`,"garp_repeat_delay":-1`), "settings.redundancy.garp_repeat_delay", "out of range"},
	{"RedundancyAuth.keys", vrrp(`,"auth":{"keys":[]}`), "settings.redundancy.auth.keys", "at least one key"},
	{"RedundancyAuth.mode", vrrpAuth(`,"mode":"strict"`), "settings.redundancy.auth.mode", "not enforce"},
	{"RedundancyAuth.anti_replay", vrrpAuth(`,"anti_replay":"never"`), "settings.redundancy.auth.anti_replay", "not time or monotonic"},
	{"RedundancyAuth.time_window", vrrpAuth(`,"time_window":301`), "settings.redundancy.auth.time_window", "out of range"},
	{"RedundancyKey.id", vrrp(`,"auth":{"keys":[{"id":0,"file":"/k"}]}`), "settings.redundancy.auth.keys[0].id", "out of range"},
	{"RedundancyKey.file", vrrp(`,"auth":{"keys":[{"id":1,"file":"k"}]}`), "settings.redundancy.auth.keys[0].file", "not a clean absolute path"},
	{"BGP.asn", settings(`"bgp":{"asn":0,"peers":[{"address":"198.18.1.1","asn":65000}]}`), "settings.bgp.asn", "out of range"},
	{"BGP.peers", settings(`"bgp":{"asn":65001,"peers":[]}`), "settings.bgp.peers", "no peers"},
	{"BGP.communities", bgp(`,"communities":["65000"]`, ""), "settings.bgp.communities[0]", "not a community"},
	{"BGP.med", bgp(`,"med":4294967296`, ""), "settings.bgp.med", "out of range"},
	{"BGPPeer.asn", bgp("", `,"asn":4294967296`), "settings.bgp.peers[0].asn", "out of range"},
	{"BGPPeer.port", bgp("", `,"port":65536`), "settings.bgp.peers[0].port", "out of range"},
	{"BGPPeer.hold_time", bgp("", `,"hold_time":2`), "settings.bgp.peers[0].hold_time", "out of range"},
	{"BGPPeer.password", bgp("", `,"password":"k"`), "settings.bgp.peers[0].password", "never goes in the document"},
	{"BGPPeer.password_file", bgp("", `,"password_file":"keys/bgp.key"`), "settings.bgp.peers[0].password_file", "not a clean absolute path"},
	{"BFD.interval", bgp("", `,"bfd":{"interval":0.001,"multiplier":3}`), "settings.bgp.peers[0].bfd.interval", "out of range"},
	{"BFD.multiplier", bgp("", `,"bfd":{"interval":0.3,"multiplier":0}`), "settings.bgp.peers[0].bfd.multiplier", "out of range"},
	{"BGPDrain.mode", bgp(`,"drain":{"mode":"shutdown"}`, ""), "settings.bgp.drain.mode", "not prepend or withdraw"},
	{"BGPDrain.prepend", bgp(`,"drain":{"prepend":17}`, ""), "settings.bgp.drain.prepend", "out of range"},
	{"BGPDrain.quiet", bgp(`,"drain":{"quiet":-1}`, ""), "settings.bgp.drain.quiet", "out of range"},
	{"BGPDrain.timeout", bgp(`,"drain":{"timeout":86401}`, ""), "settings.bgp.drain.timeout", "out of range"},
	{"Service.name", svc(`,"name":"a b"`), "services[0].name", "not a valid name"},
	{"Service.name", svc(`,"name":"tab\there"`), "services[0].name", "not a valid name"},
	{"Service.name", svc(`,"name":"` + strings.Repeat("x", 65) + `"`), "services[0].name", "not a valid name"},
	{"Service.fwmark", `{"services":[{"fwmark":-1,"servers":[]}]}`, "document", `field "services.fwmark"`},
	{"Service.quorum", svc(`,"quorum":65536`), "services[0].quorum", "out of range"},
	{"Service.hysteresis", svc(`,"hysteresis":-1`), "services[0].hysteresis", "out of range"},
	{"Service.group", svc(`,"group":"a{b"`), "services[0].group", "cannot hold a quote"},
	{"Service.group", svc(`,"group":"a b"`), "services[0].group", "not a valid name"},
	{"Match.protocol", `{"services":[{"fwmark":3,"address":"198.18.0.1","match":[{"protocol":"icmp","ports":[80]}],"servers":[]}]}`, "services[0].match[0].protocol", "not a protocol"},
	{"SorryServer.port", svc(`,"sorry_server":{"address":"198.18.0.5","port":65536}`), "services[0].sorry_server.port", "out of range"},
	{"Server.name", srv(`,"name":"r\n1"`), "services[0].servers[0].name", "not a valid name"},
	{"Server.port", srv(`,"port":-1`), "services[0].servers[0].port", "out of range"},
	{"Server.forwarding", srv(`,"forwarding":"direct"`), "services[0].servers[0].forwarding", "not a forwarding method"},
	{"Server.tunnel", srv(`,"tunnel":"vxlan"`), "services[0].servers[0].tunnel", "not a tunnel type"},
	{"Server.tunnel_port", srv(`,"tunnel":"gue","tunnel_port":65536`), "services[0].servers[0].tunnel_port", "UDP port 1..65535"},
	{"Server.tunnel_checksum", srv(`,"tunnel":"gue","tunnel_port":6080,"tunnel_checksum":"sum"`), "services[0].servers[0].tunnel_checksum", "not a tunnel checksum"},
	{"Server.upper_threshold", srv(`,"upper_threshold":-1`), "services[0].servers[0].upper_threshold", "out of range"},
	{"Server.lower_threshold", srv(`,"upper_threshold":2147483647,"lower_threshold":2147483648`), "services[0].servers[0].lower_threshold", "out of range"},
	{"Server.health", srv(`,"health":"sick"`), "services[0].servers[0].health", "not a forced health"},
	{"Check.type", chk("icmp", ""), "services[0].check.type", "not a check type"},
	{"Check.interval", chk("tcp", `,"interval":0.05`), "services[0].check.interval", "out of range"},
	{"Check.fast_interval", chk("tcp", `,"fast_interval":86401`), "services[0].check.fast_interval", "out of range"},
	{"Check.down_interval", chk("tcp", `,"down_interval":-1`), "services[0].check.down_interval", "out of range"},
	{"Check.timeout", chk("tcp", `,"timeout":3601`), "services[0].check.timeout", "out of range"},
	{"Check.rise", chk("tcp", `,"rise":1001`), "services[0].check.rise", "out of range"},
	{"Check.fall", chk("tcp", `,"fall":-1`), "services[0].check.fall", "out of range"},
	{"Check.port", chk("tcp", `,"port":65536`), "services[0].check.port", "out of range"},
	{"Check.on_failure", chk("tcp", `,"on_failure":"drop"`), "services[0].check.on_failure", "not a failure action"},
	{"Check.slow_start", chk("tcp", `,"slow_start":-1`), "services[0].check.slow_start", "out of range"},
	{"Check.warmup", chk("tcp", `,"warmup":86401`), "services[0].check.warmup", "out of range"},
	{"Check.method", chk("http", `,"method":"get"`), "services[0].check.method", "not an HTTP method"},
	{"Check.path", chk("http", `,"path":"index.html"`), "services[0].check.path", "not a request path"},
	{"Check.path", chk("http", `,"path":"/a b"`), "services[0].check.path", "not a request path"},
	{"Check.expect_status", chk("http", `,"expect_status":[200,600]`), "services[0].check.expect_status[1]", "out of range"},
	{"Check.protocol", chk("dns", `,"protocol":"sctp"`), "services[0].check.protocol", "not a check protocol"},
	{"Check.qtype", chk("dns", `,"qtype":"AXFR"`), "services[0].check.qtype", "not a query type"},
	{"Check.rcode", chk("dns", `,"rcode":"YXDOMAIN"`), "services[0].check.rcode", "not a response code"},
	{"Check.file", chk("file", `,"file":"weight"`), "services[0].check.file", "not an absolute path"},
	{"Check.file_weight", chk("file", `,"file":"/run/w","file_weight":65536`), "services[0].check.file_weight", "out of range"},
	{"unknown field", settings(`"networks":"dr"`), "document", `unknown field "networks"`},
	{"unknown field", chk("tcp", `,"retries":3`), "document", `unknown field "retries"`},
	{"unknown field", `{"$id":"x","services":[]}`, "document", `unknown field "$id"`},
	{"type", `{"services":[{"address":"198.18.0.1","port":80,"enabled":"yes","servers":[]}]}`, "document", `field "services.enabled"`},
	{"type", `{"services":{}}`, "document", `field "services"`},
	{"type", `{"$schema":5,"services":[]}`, "document", `"$schema"`},
	{"type", chk("exec", `,"command":5`), "document", "command"},
}

// Every document the validator refuses for a type, a range or an enum is
// refused by the schema too.
func TestBrokenDocumentsRefusedByBoth(t *testing.T) {
	sch := compileSchema(t)
	for _, c := range brokenDocs {
		t.Run(c.constraint, func(t *testing.T) {
			var problems []ipvsmgr.Problem
			st, err := ipvsmgr.DecodeState(strings.NewReader(c.doc))
			if err == nil {
				_, err = ipvsmgr.Compile(st)
			}
			var ve *ipvsmgr.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("the validator accepts %s (%v)", c.doc, err)
			}
			problems = ve.Problems
			if !slices.ContainsFunc(problems, func(p ipvsmgr.Problem) bool {
				return p.Field == c.field && strings.Contains(p.Message, c.msg)
			}) {
				t.Errorf("%s: no problem %s: ...%s...; got %v", c.doc, c.field, c.msg, problems)
			}
			if err := schemaCheck(t, sch, []byte(c.doc)); err == nil {
				t.Errorf("the schema accepts %s, which the validator refuses: %v", c.doc, problems)
			}
		})
	}
}

// Each constraint the schema carries has a broken document above.
func TestEveryConstraintIsExercised(t *testing.T) {
	for k := range constraints {
		if !slices.ContainsFunc(brokenDocs, func(b broken) bool { return b.constraint == k }) {
			t.Errorf("constraint %s has no broken document in brokenDocs", k)
		}
	}
}

// What depends on more than one field is the validator's alone: the
// schema takes these documents (it would be wrong to refuse them for a
// field's own value), the validator does not.
func TestCrossFieldRulesAreTheValidators(t *testing.T) {
	sch := compileSchema(t)
	for _, doc := range []string{
		`{"services":[{"address":"198.18.0.1","port":0,"servers":[]}]}`,
		svc(`,"scheduler":"rr","scheduler_flags":["fallback"]`),
		svc(`,"one_packet":true`),
		`{"services":[{"fwmark":5,"port":80,"servers":[]}]}`,
		svc(`,"persistence_netmask":"255.255.255.0"`),
		`{"services":[{"address":"198.18.0.1","port":80,"servers":[{"address":"198.18.0.11","upper_threshold":5,"lower_threshold":9}]}]}`,
		svc(`,"match":[{"protocol":"tcp","ports":[80]}]`),
		`{"services":[{"name":"a","address":"198.18.0.1","port":80,"servers":[]},{"name":"a","address":"198.18.0.1","port":81,"servers":[]}]}`,
		srv(`,"tunnel":"gre","tunnel_port":1`),
		chk("tcp", `,"method":"GET"`),
	} {
		st, err := ipvsmgr.DecodeState(strings.NewReader(doc))
		if err == nil {
			_, err = ipvsmgr.Compile(st)
		}
		if err == nil {
			t.Errorf("the validator accepts %s", doc)
		}
		if err := schemaCheck(t, sch, []byte(doc)); err != nil {
			t.Errorf("the schema refuses %s for one field's value: %v", doc, err)
		}
	}
	// No name, no group: the service is known by its address, in the
	// schema as in the validator.
	for _, doc := range []string{svc(`,"name":"","group":""`), svc(`,"name":"` + strings.Repeat("é", 64) + `"`)} {
		st, err := ipvsmgr.DecodeState(strings.NewReader(doc))
		if err == nil {
			_, err = ipvsmgr.Compile(st)
		}
		if err != nil {
			t.Errorf("the validator refuses %s: %v", doc, err)
		}
		if err := schemaCheck(t, sch, []byte(doc)); err != nil {
			t.Errorf("the schema refuses %s: %v", doc, err)
		}
	}
}
