package httpd

import (
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/auth"
)

// getBGP is GET /api/v1/bgp: the BGP speaker's sessions, what each VIP's
// route does and why, node drain's progress, and the Maglev-input
// fingerprints compared with the other directors (the bgp member of GET
// /api/v1/node, on its own).
func (a *api) getBGP(w http.ResponseWriter, r *http.Request) error {
	st := a.core.BGPStatus()
	if st == nil {
		return &server.Error{Code: server.CodeNotFound, Msg: "no BGP speaker runs here (no daemon, or the desired state has no settings.bgp)"}
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// reportFingerprints is POST /api/v1/bgp/fingerprints: a director that
// follows this one gives its Maglev fingerprints (kept, with the time) and
// gets this director's and every other follower's, so that each director
// of N compares itself with all the others. Only a director this one
// believes gets here (directorsOnly), and only with its token.
func (a *api) reportFingerprints(w http.ResponseWriter, r *http.Request) error {
	c, _ := r.Context().Value(callerKey{}).(*directorCaller)
	if c == nil {
		return &server.Error{Code: server.CodeForbidden, Msg: "only a director this one believes reports its fingerprints"}
	}
	tooLarge := &server.Error{Code: server.CodeTooLarge, Msg: fmt.Sprintf("a fingerprint report is larger than the limit of %d bytes", server.MaxReportBody)}
	if r.ContentLength > server.MaxReportBody {
		return tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, server.MaxReportBody))
	if auth.IsBodyTooLarge(err) {
		return tooLarge
	} else if err != nil {
		return err
	}
	var rep server.FingerprintReport
	if err := decodeBytes(body, &rep); err != nil {
		return err
	}
	caller := server.ReportCaller{Certificate: c.fingerprint, Addr: c.addr}
	if p, ok := auth.FromContext(r.Context()); ok {
		caller.Credential = credential(p)
	}
	set, err := a.core.ReportFingerprints(caller, rep)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, set)
	return nil
}

// credential names what p authenticated with: its token, or its session's
// user (a director's calls come with a token).
func credential(p *auth.Principal) string {
	if p.TokenID != 0 {
		return "token " + strconv.FormatInt(p.TokenID, 10) + " of " + p.User
	}
	return p.Via + " user " + p.User
}
