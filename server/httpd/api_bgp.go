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
