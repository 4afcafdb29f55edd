// Package stateschema holds the JSON Schema (draft 2020-12) of the
// desired-state document, as docs/state.schema.json has it: generated from
// the model's types (field names, JSON types, the doc comments) with the
// validator's enums and ranges (generate_test.go, `go test -update`), and
// tested against the validator both ways (schema_test.go).
package stateschema

import (
	_ "embed"
	"encoding/json"
	"strings"
)

// JSON is the schema's bytes, as docs/state.schema.json.
//
//go:embed state.schema.json
var JSON []byte

// DefsRef is how the schema refers to its definitions ("#/$defs/Service").
const DefsRef = "#/$defs/"

// Defs returns the schema's definitions, each reference rewritten from
// DefsRef to prefix (the OpenAPI document keeps them as its component
// schemas), and the name of the document's own: State.
func Defs(prefix string) (defs map[string]any, root string) {
	var doc struct {
		Defs map[string]any `json:"$defs"`
	}
	if err := json.Unmarshal(JSON, &doc); err != nil {
		panic("stateschema: state.schema.json: " + err.Error()) // embedded and tested: cannot happen
	}
	for _, d := range doc.Defs {
		rewriteRefs(d, prefix)
	}
	return doc.Defs, "State"
}

func rewriteRefs(v any, prefix string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "$ref" && strings.HasPrefix(s, DefsRef) {
				v[k] = prefix + strings.TrimPrefix(s, DefsRef)
				continue
			}
			rewriteRefs(x, prefix)
		}
	case []any:
		for _, x := range v {
			rewriteRefs(x, prefix)
		}
	}
}
