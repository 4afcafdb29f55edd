package client

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server"
)

// A peer director's answer is read only as far as MaxPeerAnswer: one
// larger (a compromised or broken peer's) is an error naming the limit,
// not a process that reads, and holds, whatever it is sent.
func TestPeerAnswerIsSizeLimited(t *testing.T) {
	sent := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		chunk := strings.Repeat("a", 1<<20)
		fmt.Fprint(w, `{"self": {"director": "`)
		for range MaxPeerAnswer>>20 + 2 {
			n, err := fmt.Fprint(w, chunk)
			sent += n
			if err != nil {
				return
			}
		}
		fmt.Fprint(w, `"}, "others": []}`)
	}))
	defer ts.Close()
	c, err := NewPeer(server.PeerDial{URL: ts.URL, Token: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ReportFingerprints(context.Background(), server.FingerprintReport{RouterID: "198.18.0.2"})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("larger than the limit of %d bytes", MaxPeerAnswer)) {
		t.Fatalf("an answer of %d bytes: %v, want an error naming the %d-byte limit", sent, err, MaxPeerAnswer)
	}
}
