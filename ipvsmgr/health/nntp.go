package health

import (
	"context"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// checkNNTP is ldirectord's check_nntp: the server's greeting must be a
// 2xx (RFC 3977's 200, posting allowed, or 201, not allowed); a 400 or
// 502 (service unavailable) fails. ldirectord sends nothing and takes no
// request or receive: nor does this, but for a QUIT when it passes.
func (c *Checker) checkNNTP(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	t, err := c.dialText(ctx, spec)
	if err != nil {
		return describe(ctx, spec, err)
	}
	defer t.Close()
	greeting, err := t.line()
	if err != nil {
		return describe(ctx, spec, err)
	}
	if !strings.HasPrefix(greeting, "2") {
		return fail("greeting " + strconv.Quote(shorten(greeting)) + ", want 200 or 201")
	}
	_ = t.send("QUIT")
	return pass(shorten(greeting))
}
