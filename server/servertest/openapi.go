package servertest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/helpers"

	"github.com/ipvsctl/ipvsctl/server/httpd"
)

// Contract counts the API calls a rig checked against the OpenAPI document.
type Contract struct {
	Checked atomic.Int64 // requests and answers validated
	Refused atomic.Int64 // requests the document refuses (and the API refused too)
}

// describedPath says whether the OpenAPI document describes path's routes
// (the API, /healthz, /metrics; not the panel).
func describedPath(path string) bool {
	return strings.HasPrefix(path, "/api/") || path == "/healthz" || path == "/metrics"
}

// validating wraps h: every request to a described path, and its answer,
// are checked against the OpenAPI document (github.com/pb33f/libopenapi-validator).
// A request the document refuses must be refused by the API (4xx), and an
// answer must be what the document says for its status; a mismatch is
// reported (the rig's t.Errorf).
func validating(t testing.TB, h http.Handler, c *Contract, report func(format string, args ...any)) http.Handler {
	doc, err := libopenapi.NewDocument(httpd.OpenAPI())
	if err != nil {
		t.Fatalf("OpenAPI document: %v", err)
	}
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		t.Fatalf("OpenAPI document: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		t.Fatalf("OpenAPI document is not valid OpenAPI 3.1: %s", describe(verrs))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !describedPath(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		check := func() *http.Request {
			cr := r.Clone(r.Context())
			cr.Body = io.NopCloser(bytes.NewReader(body))
			// The API reads a body whatever its Content-Type says (curl
			// sends none): check it as what it is.
			if cr.Header.Get("Content-Type") == "" && len(body) > 0 {
				typ := "application/json"
				if r.URL.Path == "/api/v1/import" && r.URL.Query().Get("format") != "json" {
					typ = "text/plain"
				}
				cr.Header.Set("Content-Type", typ)
			}
			return cr
		}
		reqOK, reqErrs := v.ValidateHttpRequest(check())
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			// A stream is passed on as it comes (the document says what
			// each event is); only the request is checked.
			c.Checked.Add(1)
			if !reqOK {
				c.Refused.Add(1)
				report("OpenAPI: the document refuses %s %s (%s)", r.Method, r.URL.RequestURI(), describe(reqErrs))
			}
			h.ServeHTTP(w, r)
			return
		}

		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())

		c.Checked.Add(1)
		what := r.Method + " " + r.URL.RequestURI()
		if !reqOK {
			c.Refused.Add(1)
			if rec.Code < 400 {
				report("OpenAPI: the document refuses %s (%s), which the API answered %d", what, describe(reqErrs), rec.Code)
				return
			}
		}
		resp := rec.Result()
		resp.Request = check()
		if ok, errs := v.ValidateHttpResponse(resp.Request, resp); !ok {
			if errs = unmatched(errs); len(errs) > 0 {
				report("OpenAPI: the answer %d to %s is not what the document says: %s\n%s", rec.Code, what, describe(errs), clip(rec.Body.Bytes()))
			}
		}
	})
}

// unmatched drops the errors of a request no operation matches (an unknown
// route: the 404 is the router's).
func unmatched(errs []*verrors.ValidationError) []*verrors.ValidationError {
	var out []*verrors.ValidationError
	for _, e := range errs {
		if e.ValidationType != helpers.PathValidation {
			out = append(out, e)
		}
	}
	return out
}

func describe(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for i, e := range errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Message)
		if e.Reason != "" {
			b.WriteString(": " + e.Reason)
		}
		for _, s := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, " [%s: %s]", s.FieldPath, s.Reason)
		}
	}
	return b.String()
}

func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}
