package httpd

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/formats"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
)

// FieldError names one invalid field of a request.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// ErrorBody is every error the API answers: the message is the CLI's.
type ErrorBody struct {
	Error  string       `json:"error"`
	Code   server.Code  `json:"code"`
	Fields []FieldError `json:"fields"`
	// For a stale write: the revision now current and what changed since
	// the one the write was based on.
	CurrentRevision int64    `json:"current_revision,omitempty"`
	ChangesSince    []string `json:"changes_since,omitempty"`
	// Refused is where an import's file was refused: its line (and the
	// included file, if it was one), and what is wrong there.
	Refused *formats.Note `json:"refused,omitempty"`
}

// statusOf is the HTTP status for each kind of failure (the core's one mapping).
func statusOf(code server.Code) int { return server.HTTPStatus(code) }

// errorBody describes err for the API.
func errorBody(err error) (int, *ErrorBody) {
	if auth.IsBodyTooLarge(err) {
		return http.StatusRequestEntityTooLarge, &ErrorBody{Error: err.Error(), Code: server.CodeTooLarge, Fields: []FieldError{}}
	}
	code := server.CodeOf(err)
	b := &ErrorBody{Error: err.Error(), Code: code, Fields: []FieldError{}}
	var ve *ipvsmgr.ValidationError
	if errors.As(err, &ve) {
		b.Error = "invalid desired state"
		if code == server.CodeMalformed {
			b.Error = ve.Problems[0].Message
		}
		for _, p := range ve.Problems {
			b.Fields = append(b.Fields, FieldError{Path: p.Field, Message: p.Message})
		}
	}
	var stale *server.StaleError
	if errors.As(err, &stale) {
		b.CurrentRevision = stale.Current
	}
	var refused *formats.ParseError
	if errors.As(err, &refused) {
		b.Refused = &formats.Note{File: refused.File, Line: refused.Line, Msg: refused.Msg}
	}
	return statusOf(code), b
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// ErrorBodyOf is the status and body the API answers err with.
func ErrorBodyOf(err error) (int, *ErrorBody) { return errorBody(err) }
