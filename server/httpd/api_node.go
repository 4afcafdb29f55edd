package httpd

import (
	"net/http"
	"strconv"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

// Headers of GET /api/v1/state?after=N: what replication compares.
const (
	HeaderRevisionAt     = "X-Ipvsctl-Revision-At"
	HeaderRevisionAuthor = "X-Ipvsctl-Revision-Author"
	HeaderContentHash    = "X-Ipvsctl-Content-Hash"
	HeaderNode           = "X-Ipvsctl-Node"
)

// waitState is GET /api/v1/state?after=N, the long poll replication uses:
// it answers as soon as the current revision is newer than N, or after
// about 25 s anyway, with the document exactly as stored (so that its hash
// is the one in the header).
func (a *api) waitState(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query().Get("after")
	after, err := strconv.ParseInt(v, 10, 64)
	if err != nil || after < 0 {
		return &server.Error{Code: server.CodeBadInput, Msg: "after: " + strconv.Quote(v) + " is not a revision number"}
	}
	release, ok := a.polls.take(r)
	if !ok {
		tooManyPolls(w, "long polls", MaxLongPollsPerUser)
		return nil
	}
	defer release()
	defer a.followerPolled(r, after)()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(server.LongPollWait + 30*time.Second))
	h, err := a.core.WaitHead(r.Context(), after, server.LongPollWait)
	if err != nil {
		return err
	}
	if err := a.stillBelieved(r); err != nil {
		return err
	}
	hd := w.Header()
	hd.Set("ETag", strconv.Quote(strconv.FormatInt(h.Revision, 10)))
	hd.Set(HeaderRevisionAt, h.At.UTC().Format(time.RFC3339Nano))
	hd.Set(HeaderRevisionAuthor, h.Author)
	hd.Set(HeaderContentHash, h.Hash)
	hd.Set(HeaderNode, a.core.NodeName(r.Context()))
	hd.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	doc := h.Document
	if doc == nil {
		doc = []byte(`{"settings":{"tcp_timeout":0,"tcpfin_timeout":0,"udp_timeout":0},"services":[]}`)
	}
	_, err = w.Write(doc)
	return err
}

func (a *api) getNode(w http.ResponseWriter, r *http.Request) error {
	v, err := a.core.NodeSettings(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (a *api) patchNode(w http.ResponseWriter, r *http.Request) error {
	var p server.NodePatch
	if err := decode(r, &p); err != nil {
		return err
	}
	v, err := a.core.SetNode(r.Context(), actor(r), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
