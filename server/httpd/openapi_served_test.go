package httpd_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/ipvsctl/ipvsctl/server/auth"
	"github.com/ipvsctl/ipvsctl/server/httpd"
	"github.com/ipvsctl/ipvsctl/server/servertest"
)

// A viewer gets the OpenAPI document, docs/openapi.json's very bytes; no
// one without a session or token does.
func TestOpenAPIServedToViewers(t *testing.T) {
	g := servertest.Start(t)
	resp, body := g.API(t, auth.Viewer, "GET", httpd.PathOpenAPI, "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s as a viewer: %s %s", httpd.PathOpenAPI, resp.Status, resp.Header.Get("Content-Type"))
	}
	docs, err := os.ReadFile("../../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal([]byte(body), docs) {
		t.Errorf("the served document (%d bytes) is not docs/openapi.json (%d bytes)", len(body), len(docs))
	}
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil || doc.OpenAPI != "3.1.0" || doc.Paths[httpd.PathOpenAPI] == nil {
		t.Errorf("served: openapi %q, %d paths (%v)", doc.OpenAPI, len(doc.Paths), err)
	}
	if resp, _ := do(t, g, "", "GET", httpd.PathOpenAPI, ""); resp.StatusCode != 401 {
		t.Errorf("without credentials: %s", resp.Status)
	}
}
