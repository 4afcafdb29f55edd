package ipvsmgr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Documents written before a field was renamed still decode: their stored
// revisions, drafts and files say drain_timeout for retire_timeout and, in
// settings.redundancy, peers for unicast_peers (settings.bgp.peers, the
// routers, kept its name). The old name is read and never written; giving
// both is refused.

// UnmarshalJSON reads settings, drain_timeout as retire_timeout.
func (s *Settings) UnmarshalJSON(b []byte) error {
	type plain Settings
	var v struct {
		*plain
		Old *int `json:"drain_timeout"`
	}
	v.plain = (*plain)(s)
	if err := strictJSON(b, &v, "settings."); err != nil {
		return err
	}
	if v.Old != nil {
		if s.RetireTimeout != 0 {
			return fmt.Errorf("settings: drain_timeout is the old name of retire_timeout: give one")
		}
		s.RetireTimeout = *v.Old
	}
	return nil
}

// UnmarshalJSON reads settings.redundancy, peers as unicast_peers.
func (r *Redundancy) UnmarshalJSON(b []byte) error {
	type plain Redundancy
	var v struct {
		*plain
		Old []string `json:"peers"`
	}
	v.plain = (*plain)(r)
	if err := strictJSON(b, &v, "settings.redundancy."); err != nil {
		return err
	}
	if v.Old != nil {
		if r.UnicastPeers != nil {
			return fmt.Errorf("settings.redundancy: peers is the old name of unicast_peers: give one")
		}
		r.UnicastPeers = v.Old
	}
	return nil
}

// strictJSON decodes b into v, unknown fields refused, as the document is.
// A value of the wrong type is named by its path in the document (prefix
// and the field): an offset here would be within b, not the document.
func strictJSON(b []byte, v any, prefix string) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := strings.ReplaceAll(te.Field, "plain.", "")
		return &FieldTypeError{Field: prefix + field, Value: te.Value, Type: te.Type.String()}
	}
	return err
}

// FieldTypeError is a value of the wrong JSON type at Field.
type FieldTypeError struct{ Field, Value, Type string }

func (e *FieldTypeError) Error() string {
	return fmt.Sprintf("field %q: got JSON %s, want %s", e.Field, e.Value, e.Type)
}
