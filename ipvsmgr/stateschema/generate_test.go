package stateschema_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/stateschema"
)

var update = flag.Bool("update", false, "rewrite state.schema.json and docs/state.schema.json from the model")

// The files the schema is written to: the embedded copy and the docs' one.
var outputs = []string{"state.schema.json", "../../docs/state.schema.json"}

// any0 is "0, or in lo..hi": the validator's "0 means the default".
func any0(lo, hi float64) map[string]any {
	return map[string]any{"anyOf": []any{map[string]any{"const": 0}, map[string]any{"minimum": lo, "maximum": hi}}}
}

func rng(lo, hi float64) map[string]any { return map[string]any{"minimum": lo, "maximum": hi} }

func enum(vals ...string) map[string]any { return map[string]any{"enum": vals} }

func items(c map[string]any) map[string]any { return map[string]any{"items": c} }

const (
	maxU32       = 1<<32 - 1
	maxI31       = 1<<31 - 1
	maxTimeout   = 2147483 // the kernel keeps timeouts as jiffies in an int
	ifacePattern = `^[^/\s:]{1,15}$`
)

var ifaceName = map[string]any{"pattern": ifacePattern, "not": enum(".", "..")}

// A name: "" is none (the service is known by its address).
var objName = map[string]any{"maxLength": ipvsmgr.MaxNameChars, "pattern": `^\S*$`}

// constraints are the validator's per-field enums and ranges (validate.go,
// compile.go, checkcompile.go, bgpsettings.go), by "Type.json_name". What
// depends on another field (port 0 only with persistence, a tunnel only
// for tun, ...) is the validator's alone. TestEveryConstraintIsExercised
// holds a broken document for each.
var constraints = map[string]map[string]any{
	"Settings.network":        enum("dr", "nat", "tun"),
	"Settings.tcp_timeout":    rng(0, maxTimeout),
	"Settings.tcpfin_timeout": rng(0, maxTimeout),
	"Settings.udp_timeout":    rng(0, maxTimeout),
	"Settings.retire_timeout": rng(0, 7*24*3600),

	"Redundancy.vrid":              rng(1, 255),
	"Redundancy.interface":         ifaceName,
	"Redundancy.advert_interval":   any0(0.01, 40.95),
	"Redundancy.preempt_delay":     rng(0, 1000),
	"Redundancy.preempt_sync_wait": rng(0, 3600),
	"Redundancy.sync_interface":    ifaceName,
	"Redundancy.sync_id":           rng(0, 255),
	"Redundancy.track_interfaces":  items(ifaceName),
	"Redundancy.garp_count":        rng(0, 1000),
	"Redundancy.garp_repeat_delay": rng(0, 3600),
	"RedundancyAuth.keys":          {"minItems": 1},
	"RedundancyAuth.mode":          enum("enforce", "permissive", "receive-only"),
	"RedundancyAuth.anti_replay":   enum("time", "monotonic"),
	"RedundancyAuth.time_window":   rng(0, 300),
	"RedundancyKey.id":             rng(1, 255),
	"RedundancyKey.file":           {"pattern": "^/"},

	"BGP.asn":               rng(1, maxU32),
	"BGP.peers":             {"minItems": 1},
	"BGP.communities":       items(map[string]any{"pattern": `^[0-9]+:[0-9]+$`}),
	"BGP.med":               rng(0, maxU32),
	"BGPPeer.asn":           rng(1, maxU32),
	"BGPPeer.port":          rng(0, 65535),
	"BGPPeer.hold_time":     any0(3, 65535),
	"BGPPeer.password":      {"not": map[string]any{}}, // refused: the key goes in password_file
	"BGPPeer.password_file": {"pattern": "^/"},
	"BFD.interval":          rng(0.01, 60),
	"BFD.multiplier":        rng(1, 255),
	"BGPDrain.mode":         enum(ipvsmgr.DrainPrepend, ipvsmgr.DrainWithdraw),
	"BGPDrain.prepend":      rng(0, 16),
	"BGPDrain.quiet":        rng(0, 86400),
	"BGPDrain.timeout":      rng(0, 86400),

	"Service.name":            objName,
	"Service.protocol":        enum("tcp", "udp", "sctp"),
	"Service.port":            rng(0, 65535),
	"Service.fwmark":          rng(0, maxU32),
	"Service.interface":       ifaceName,
	"Service.scheduler":       enum(ipvsmgr.Schedulers()...),
	"Service.scheduler_flags": items(enum("fallback", "port")),
	"Service.persistence":     rng(0, 365*24*3600),
	"Service.forwarding":      enum("dr", "nat", "tun"),
	"Service.quorum":          rng(0, 65535),
	"Service.hysteresis":      {"minimum": 0},
	"Service.group":           {"maxLength": ipvsmgr.MaxNameChars, "pattern": `^[^\s"{}#!]*$`},
	"Match.protocol":          enum("tcp", "udp", "sctp"),
	"Match.ports":             items(rng(1, 65535)),
	"SorryServer.port":        rng(0, 65535),
	"Server.name":             objName,
	"Server.port":             rng(0, 65535),
	"Server.weight":           rng(0, 65535),
	"Server.forwarding":       enum("dr", "nat", "tun"),
	"Server.tunnel":           enum("ipip", "gue", "gre"),
	"Server.tunnel_port":      rng(0, 65535),
	"Server.tunnel_checksum":  enum("nocsum", "csum", "remcsum"),
	"Server.upper_threshold":  rng(0, maxI31),
	"Server.lower_threshold":  rng(0, maxI31),
	"Server.health":           enum("auto", "up", "down"),
	"Check.type":              enum(ipvsmgr.CheckTypes()...),
	"Check.interval":          any0(0.1, 86400),
	"Check.fast_interval":     any0(0.1, 86400),
	"Check.down_interval":     any0(0.1, 86400),
	"Check.timeout":           any0(0.1, 3600),
	"Check.rise":              rng(0, 1000),
	"Check.fall":              rng(0, 1000),
	"Check.port":              rng(0, 65535),
	"Check.on_failure":        enum("quiesce", "remove"),
	"Check.slow_start":        rng(0, 86400),
	"Check.warmup":            rng(0, 86400),
	"Check.method":            {"pattern": "^[A-Z]{1,16}$"},
	"Check.path":              {"pattern": `^/\S*$`},
	"Check.expect_status":     items(rng(100, 599)),
	"Check.protocol":          enum("tcp", "udp"),
	"Check.qtype":             enum(ipvsmgr.DNSQueryTypes()...),
	"Check.rcode":             enum(ipvsmgr.DNSResponseCodes()...),
	"Check.file":              {"pattern": "^/"},
	"Check.file_weight":       rng(-65535, 65535),
}

// generator builds the schema's definitions from the model's types.
type generator struct {
	t    *testing.T
	docs map[string]string // "Type" and "Type.Field": the doc comment
	defs map[string]any
	used map[string]bool // constraints applied
}

func (g *generator) schemaOf(t reflect.Type) map[string]any {
	if t == reflect.TypeFor[ipvsmgr.Argv]() {
		// A program and its arguments, or one string split into them.
		return map[string]any{"oneOf": []any{
			map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			map[string]any{"type": "string"}}}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.schemaOf(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Uint32:
		return map[string]any{"type": "integer", "minimum": 0, "maximum": maxU32}
	case reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.schemaOf(t.Elem())}
	case reflect.Struct:
		g.define(t)
		return map[string]any{"$ref": stateschema.DefsRef + t.Name()}
	}
	g.t.Fatalf("model type %s (%s) has no JSON Schema mapping", t, t.Kind())
	return nil
}

func (g *generator) define(t reflect.Type) {
	if _, done := g.defs[t.Name()]; done {
		return
	}
	props := map[string]any{}
	def := map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	g.defs[t.Name()] = def
	if d := g.docs[t.Name()]; d != "" {
		def["description"] = d
	}
	g.fields(t, props)
}

// fields adds t's fields to props, an embedded struct's (VRRPNotify) as
// t's own, as encoding/json writes them.
func (g *generator) fields(t reflect.Type, props map[string]any) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			g.fields(f.Type, props)
			continue
		}
		if name == "" {
			g.t.Fatalf("%s.%s has no json name", t.Name(), f.Name)
		}
		s := g.schemaOf(f.Type)
		omitempty := strings.Contains(opts, "omitempty")
		if !omitempty && f.Type.Kind() == reflect.Slice {
			// json.Marshal writes a nil slice as null.
			s = map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
		}
		if c, ok := constraints[t.Name()+"."+name]; ok {
			g.used[t.Name()+"."+name] = true
			target := s
			if alt, ok := s["anyOf"].([]any); ok && !omitempty {
				target = alt[0].(map[string]any)
			}
			for k, v := range c {
				if k == "items" {
					for k2, v2 := range v.(map[string]any) {
						target["items"].(map[string]any)[k2] = v2
					}
					continue
				}
				target[k] = v
			}
		}
		if d := g.docs[t.Name()+"."+f.Name]; d != "" {
			s["description"] = d
		}
		props[name] = s // none is required: the decoder takes a missing field as its zero value
	}
}

// docComments reads the doc comments of the model's types and fields.
func docComments(t *testing.T) map[string]string {
	fset := token.NewFileSet()
	files, err := filepath.Glob("../*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	text := func(groups ...*ast.CommentGroup) string {
		for _, cg := range groups {
			if cg != nil {
				return strings.Join(strings.Fields(cg.Text()), " ")
			}
		}
		return ""
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				out[ts.Name.Name] = text(ts.Doc, gd.Doc)
				for _, fld := range st.Fields.List {
					for _, n := range fld.Names {
						out[ts.Name.Name+"."+n.Name] = text(fld.Doc, fld.Comment)
					}
				}
			}
		}
	}
	return out
}

func generate(t *testing.T) []byte {
	g := &generator{t: t, docs: docComments(t), defs: map[string]any{}, used: map[string]bool{}}
	g.define(reflect.TypeFor[ipvsmgr.State]())
	state := g.defs["State"].(map[string]any)
	state["properties"].(map[string]any)[ipvsmgr.SchemaKey] = map[string]any{"type": "string",
		"description": "The schema this document follows, for an editor; ipvsctl reads past it and never stores it."}
	var unused []string
	for k := range constraints {
		if !g.used[k] {
			unused = append(unused, k)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Fatalf("constraints name no field of the model: %v", unused)
	}
	doc := map[string]any{
		"$schema":     "https://json-schema.org/draft/2020-12/schema",
		"$id":         "urn:ipvsctl:state-document",
		"title":       "ipvsctl desired state",
		"description": "The desired-state document of an ipvsctl director: what `ipvsctl apply -f` reads, `ipvsctl export` writes and the API serves at /api/v1/state. Generated from the model (ipvsmgr); the validator also checks what depends on more than one field (docs/state-schema.md).",
		"$ref":        stateschema.DefsRef + "State",
		"$defs":       g.defs,
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The schema files are what the model generates: run with -update after a
// change to the model or to the constraints, and review the diff.
func TestSchemaIsGenerated(t *testing.T) {
	want := generate(t)
	for _, path := range outputs {
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what the model generates: run go test ./ipvsmgr/stateschema -update", path)
		}
	}
	if !bytes.Equal(stateschema.JSON, want) && !*update {
		t.Errorf("the embedded schema is stale")
	}
}
