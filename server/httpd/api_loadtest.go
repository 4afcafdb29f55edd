package httpd

import (
	"net/http"
	"strconv"

	"github.com/ipvsctl/ipvsctl/server"
)

// The load test's run markers: GET lists a test's runs (?test=NAME, the
// latest by default), POST starts one, POST .../{id}/end ends it with the
// load generator's figures.

func (a *api) listLoadRuns(w http.ResponseWriter, r *http.Request) error {
	rs, err := a.core.LoadRuns(r.Context(), r.URL.Query().Get("test"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rs)
	return nil
}

func (a *api) startLoadRun(w http.ResponseWriter, r *http.Request) error {
	var s server.LoadRunStart
	if err := decode(r, &s); err != nil {
		return err
	}
	run, err := a.core.StartLoadRun(r.Context(), actor(r), s)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, run)
	return nil
}

func (a *api) endLoadRun(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return &server.Error{Code: server.CodeBadInput, Msg: "id: " + strconv.Quote(r.PathValue("id")) + " is not a load run's number"}
	}
	var res server.LoadResult
	if err := decode(r, &res); err != nil {
		return err
	}
	run, err := a.core.EndLoadRun(r.Context(), actor(r), id, res)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, run)
	return nil
}
