// Package schemagen writes JSON Schemas (draft 2020-12, as OpenAPI 3.1 takes
// them) of Go types as encoding/json writes and reads them: field names from
// the json tags, nil slices, maps and pointers as null unless omitempty, no
// unknown fields. The OpenAPI document's generator (server/httpd's tests)
// uses it for the API's request and response types; types it cannot read by
// reflection (a MarshalJSON of their own) are given by the caller.
package schemagen

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"
)

// Generator names each struct type it meets as a definition under Prefix.
type Generator struct {
	// Prefix is how a reference starts ("#/components/schemas/").
	Prefix string
	// Known are types with a schema of their own (the state document's
	// definitions, types with MarshalJSON): used as they are.
	Known map[reflect.Type]map[string]any
	// Defs are the definitions made, by name.
	Defs  map[string]any
	names map[reflect.Type]string
}

var (
	marshaler     = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
	notName       = regexp.MustCompile(`[^A-Za-z0-9_]`)
)

// Schema is t's schema: a reference for a named struct (defined in Defs).
func (g *Generator) Schema(t reflect.Type) (map[string]any, error) {
	if s, ok := g.Known[t]; ok {
		return clone(s), nil
	}
	if t == reflect.TypeFor[time.Time]() {
		return map[string]any{"type": "string", "format": "date-time"}, nil
	}
	if t == reflect.TypeFor[json.RawMessage]() {
		return map[string]any{}, nil
	}
	if t.Kind() != reflect.Pointer && (t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) ||
		t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler)) {
		return nil, fmt.Errorf("%s marshals itself: give its schema in Known", t)
	}
	switch t.Kind() {
	case reflect.Pointer:
		s, err := g.Schema(t.Elem())
		if err != nil {
			return nil, err
		}
		return nullable(s), nil
	case reflect.String:
		return map[string]any{"type": "string"}, nil
	case reflect.Bool:
		return map[string]any{"type": "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "minimum": 0}, nil
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}, nil
	case reflect.Interface:
		return map[string]any{}, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return nullable(map[string]any{"type": "string", "contentEncoding": "base64"}), nil
		}
		items, err := g.Schema(t.Elem())
		if err != nil {
			return nil, err
		}
		s := map[string]any{"type": "array", "items": items}
		if t.Kind() == reflect.Array {
			s["minItems"], s["maxItems"] = t.Len(), t.Len()
			return s, nil
		}
		return nullable(s), nil
	case reflect.Map:
		if k := t.Key().Kind(); k != reflect.String && (k < reflect.Int || k > reflect.Uint64) {
			return nil, fmt.Errorf("%s: map keys of kind %s", t, k)
		}
		v, err := g.Schema(t.Elem())
		if err != nil {
			return nil, err
		}
		return nullable(map[string]any{"type": "object", "additionalProperties": v}), nil
	case reflect.Struct:
		if t.Name() == "" {
			return g.Inline(t)
		}
		name, err := g.define(t)
		if err != nil {
			return nil, err
		}
		return map[string]any{"$ref": g.Prefix + name}, nil
	}
	return nil, fmt.Errorf("%s: no JSON Schema for kind %s", t, t.Kind())
}

// Inline is t's own object schema, not a reference (for an anonymous body).
func (g *Generator) Inline(t reflect.Type) (map[string]any, error) {
	props := map[string]any{}
	if err := g.fields(t, props); err != nil {
		return nil, err
	}
	return map[string]any{"type": "object", "additionalProperties": false, "properties": props}, nil
}

func (g *Generator) define(t reflect.Type) (string, error) {
	if g.names == nil {
		g.names = map[reflect.Type]string{}
	}
	if g.Defs == nil {
		g.Defs = map[string]any{}
	}
	if n, ok := g.names[t]; ok {
		return n, nil
	}
	if t.Name() == "" {
		return "", fmt.Errorf("an anonymous struct %s: use Inline", t)
	}
	name := notName.ReplaceAllString(t.Name(), "_")
	if _, taken := g.Defs[name]; taken {
		pkg := t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:]
		name = strings.ToUpper(pkg[:1]) + pkg[1:] + name
	}
	g.names[t] = name
	g.Defs[name] = map[string]any{} // taken, for a recursive type
	s, err := g.Inline(t)
	if err != nil {
		return "", err
	}
	g.Defs[name] = s
	return name, nil
}

// fields adds t's fields (and its embedded structs' ones) to props.
func (g *Generator) fields(t reflect.Type, props map[string]any) error {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if err := g.fields(et, props); err != nil {
					return err
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s, err := g.Schema(f.Type)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t, f.Name, err)
		}
		if strings.Contains(opts, "string") {
			s = map[string]any{"type": "string"}
		}
		if strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") {
			s = notNull(s) // omitted when nil
		}
		props[name] = s
	}
	return nil
}

func nullable(s map[string]any) map[string]any {
	if _, ok := s["$ref"]; ok {
		return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
	}
	if typ, ok := s["type"].(string); ok {
		s["type"] = []any{typ, "null"}
		return s
	}
	return s
}

// notNull undoes nullable.
func notNull(s map[string]any) map[string]any {
	if alt, ok := s["anyOf"].([]any); ok && len(alt) == 2 {
		if n, ok := alt[1].(map[string]any); ok && n["type"] == "null" && len(n) == 1 {
			return alt[0].(map[string]any)
		}
	}
	if typ, ok := s["type"].([]any); ok && len(typ) == 2 && typ[1] == "null" {
		s["type"] = typ[0]
	}
	return s
}

func clone(s map[string]any) map[string]any {
	b, _ := json.Marshal(s)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}
