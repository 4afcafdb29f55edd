package httpd

import (
	_ "embed"
	"net/http"
)

// PathOpenAPI is where the API serves its OpenAPI 3.1 document.
const PathOpenAPI = "/api/v1/openapi.json"

// openAPI is the API's OpenAPI document, docs/openapi.json's bytes: both are
// generated from the route table and the description in openapi_test.go
// (go test ./server/httpd -run TestOpenAPIIsGenerated -update).
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI is the API's OpenAPI 3.1 document.
func OpenAPI() []byte { return openAPI }

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(openAPI)
}
