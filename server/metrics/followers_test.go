package metrics

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ipvsctl/ipvsctl/server"
)

// On a source, each follower's lag and connection, and the refused
// callers, are in /metrics.
func TestFollowerMetrics(t *testing.T) {
	ctx := context.Background()
	core, st := testCore(t, ctx)
	a := server.Actor{Name: "t", Via: "test"}
	doc := `{"services":[{"name":"web","address":"198.18.0.100","port":80,"servers":[{"address":"198.18.0.11"}]}]}`
	if _, err := core.Apply(ctx, a, strings.NewReader(doc), "test", server.WriteOptions{NoApply: true}); err != nil {
		t.Fatal(err)
	}
	head, err := st.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fpA, fpB := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	doneA := core.FollowerPolled(server.FollowerPoll{Fingerprint: fpA, Addr: "198.18.0.2", Node: "198.18.0.2", After: head.Revision, Hash: head.Hash})
	defer doneA()
	core.FollowerPolled(server.FollowerPoll{Fingerprint: fpB, Addr: "198.18.0.3", Node: "198.18.0.3", After: 0})()
	core.CallerRefused(ctx, "198.18.0.66", "", errors.New("peer not trusted: the caller showed no certificate"))

	srv := httptest.NewServer(New(core).Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	for _, want := range []string{
		`ipvsctl_replication_follower_lag_seconds{fingerprint="` + fpA + `",follower="198.18.0.2"} 0`,
		`ipvsctl_replication_follower_connected{fingerprint="` + fpA + `",follower="198.18.0.2"} 1`,
		`ipvsctl_replication_follower_connected{fingerprint="` + fpB + `",follower="198.18.0.3"} 0`,
		`ipvsctl_replication_callers_refused 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in /metrics", want)
		}
	}
	if !strings.Contains(body, `ipvsctl_replication_follower_lag_seconds{fingerprint="`+fpB+`",follower="198.18.0.3"} `) ||
		strings.Contains(body, `ipvsctl_replication_follower_lag_seconds{fingerprint="`+fpB+`",follower="198.18.0.3"} 0`+"\n") {
		t.Errorf("the follower without revision 1 is not shown behind:\n%s", grep(body, "follower_lag"))
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
