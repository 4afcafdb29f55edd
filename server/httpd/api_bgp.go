package httpd

import (
	"net/http"

	"github.com/ipvsctl/ipvsctl/server"
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
	var rep server.FingerprintReport
	if err := decode(r, &rep); err != nil {
		return err
	}
	set, err := a.core.ReportFingerprints(server.ReportCaller{Certificate: c.fingerprint, Addr: c.addr}, rep)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, set)
	return nil
}
