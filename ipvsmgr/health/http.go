package health

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// maxBody is how much of a reply body expect_body is matched against.
const maxBody = 64 << 10

// compiled returns a regular expression compiled once: the same few are
// used by every run.
func (c *Checker) compiled(expr string) (*regexp.Regexp, error) {
	if re, ok := c.regexps.Load(expr); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	c.regexps.Store(expr, re)
	return re, nil
}

func (c *Checker) checkHTTP(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	scheme := "http"
	if spec.TLS {
		scheme = "https"
	}
	host := spec.Host
	if host == "" {
		host = spec.Target.String()
	}
	u := &url.URL{Scheme: scheme, Host: spec.Target.String()}
	target, err := url.Parse(u.String() + spec.Path)
	if err != nil {
		return fault("bad request path " + strconv.Quote(spec.Path))
	}
	req, err := http.NewRequestWithContext(ctx, spec.Method, target.String(), nil)
	if err != nil {
		return fault(shorten(err.Error()))
	}
	req.Host = host
	req.Header.Set("User-Agent", "ipvsctl-health")
	req.Close = true
	tr := &http.Transport{
		// Always the real server's address, whatever the Host header says.
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dial(ctx, "tcp", spec.Target.String())
		},
		DisableKeepAlives:  true,
		DisableCompression: true,
		ForceAttemptHTTP2:  false,
	}
	if spec.TLS {
		sni := spec.SNI
		if sni == "" && spec.Host != "" {
			sni, _, _ = net.SplitHostPort(spec.Host)
			if sni == "" {
				sni = spec.Host
			}
		}
		if sni == "" {
			sni = spec.Target.Addr().String()
		}
		tr.TLSClientConfig = &tls.Config{
			ServerName:         sni,
			InsecureSkipVerify: !spec.TLSVerify,
			RootCAs:            c.RootCAs,
		}
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return describe(ctx, spec, err)
	}
	defer resp.Body.Close()
	status := "HTTP " + strconv.Itoa(resp.StatusCode)
	if !statusOK(spec.ExpectStatus, resp.StatusCode) {
		return fail(status)
	}
	if spec.ExpectBody != "" {
		re, err := c.compiled(spec.ExpectBody)
		if err != nil {
			return fault("expect_body: " + err.Error())
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		if err != nil {
			return describe(ctx, spec, err)
		}
		if !re.Match(body) {
			return fail("body did not match")
		}
	}
	return pass(status)
}

func statusOK(want []int, got int) bool {
	if len(want) == 0 {
		return got >= 200 && got < 400
	}
	return slices.Contains(want, got)
}
