package httpd

import (
	"net/http"

	"github.com/ipvsctl/ipvsctl/server"
)

// readyz says whether the director is ready: every check has run once
// since the start and its results are on the kernel (with no checks, the
// first reconcile is done). 200 when ready, 503 before, each with the
// checker's status (how many checks have not run yet), so that systemd,
// a load balancer's probe or a load test can wait for it.
func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	st := a.core.CheckerStatus()
	if st == nil {
		st = &server.CheckerStatus{Waiting: "a daemon to run the checks (ipvsctl serve)"}
	}
	code := http.StatusOK
	if !st.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, st)
}
