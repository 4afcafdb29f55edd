package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/httpd"
)

// NodeSettings returns the daemon's node settings and redundancy status.
func (c *Client) NodeSettings(ctx context.Context) (*server.NodeView, error) {
	var v server.NodeView
	if _, err := c.do(ctx, "GET", "/api/v1/node", nil, nil, nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// SetNode changes the daemon's node settings.
func (c *Client) SetNode(ctx context.Context, _ server.Actor, p server.NodePatch) (*server.NodeView, error) {
	var v server.NodeView
	if _, err := c.do(ctx, "PATCH", "/api/v1/node", nil, nil, jsonBody(p), &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// WaitState is the long poll replication makes: the daemon's current
// revision, as soon as it is newer than after (or after about 25 s).
func (c *Client) WaitState(ctx context.Context, after int64, me server.FollowerReport) (*server.PeerState, error) {
	u := c.base + "/api/v1/state?" + url.Values{"after": {strconv.FormatInt(after, 10)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if me.Hash != "" {
		req.Header.Set(httpd.HeaderFollowerHash, me.Hash)
	}
	if me.Error != "" {
		req.Header.Set(httpd.HeaderFollowerError, headerValue(me.Error, 512))
	}
	if me.Node != "" {
		req.Header.Set(httpd.HeaderNode, me.Node)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ipvsctl daemon at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return nil, decodeError(resp)
	}
	// A peer's answer is read only as far as a director's document may go
	// (httpd.MaxBody): one byte more says it is not one.
	doc, err := io.ReadAll(io.LimitReader(resp.Body, httpd.MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("read the state of %s: %w", c.base, err)
	}
	if len(doc) > httpd.MaxBody {
		return nil, fmt.Errorf("the state of %s is larger than %d MiB, the most a director's document may be: not read past that",
			c.base, httpd.MaxBody>>20)
	}
	h := resp.Header
	ps := &server.PeerState{Head: server.Head{Author: h.Get(httpd.HeaderRevisionAuthor), Hash: h.Get(httpd.HeaderContentHash), Document: doc},
		Node: h.Get(httpd.HeaderNode)}
	// An answer without a revision is not a director's (a proxy's page, another
	// program on the port): taken as "the peer has nothing yet" it would be polled again at once, forever.
	etag := h.Get("ETag")
	ps.Revision, err = strconv.ParseInt(strings.Trim(etag, `"`), 10, 64)
	if err != nil || ps.Revision < 0 {
		return nil, fmt.Errorf("the answer of %s is not an ipvsctl director's state: ETag %q is not a revision (%s, %d bytes)",
			c.base, etag, resp.Header.Get("Content-Type"), len(doc))
	}
	if ps.Revision == 0 {
		return ps, nil
	}
	if ps.At, err = time.Parse(time.RFC3339Nano, h.Get(httpd.HeaderRevisionAt)); err != nil {
		return nil, fmt.Errorf("the state of %s: %s %q is not a time", c.base, httpd.HeaderRevisionAt, h.Get(httpd.HeaderRevisionAt))
	}
	if server.DocumentHash(doc) != ps.Hash {
		return nil, fmt.Errorf("the state of %s arrived damaged (its hash differs)", c.base)
	}
	return ps, nil
}

var _ server.Peer = (*Client)(nil)

// headerValue is s as a header may carry it: no control characters, at
// most n bytes.
func headerValue(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > n {
		s = s[:n]
	}
	return s
}

// ReportFingerprints gives the director this one follows its Maglev
// fingerprints and answers that director's and every other follower's
// (POST /api/v1/bgp/fingerprints).
func (c *Client) ReportFingerprints(ctx context.Context, rep server.FingerprintReport) (*server.FingerprintSet, error) {
	var set server.FingerprintSet
	if _, err := c.do(ctx, "POST", "/api/v1/bgp/fingerprints", nil, nil, jsonBody(rep), &set); err != nil {
		return nil, err
	}
	return &set, nil
}
