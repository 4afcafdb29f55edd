package panel

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"path"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/formats"
	"github.com/ipvsctl/ipvsctl/server"
)

// maxUpload bounds an uploaded configuration (the importers read up to 64 MB;
// a real one is a few MB).
const maxUpload = 16 << 20

type importData struct {
	Formats   []string
	Exports   []string
	Format    string
	Name      string
	HasDraft  bool
	Preview   bool
	Changes   []string
	Kernel    []string
	DiffErr   string
	Imported  []ipvsmgr.ImportedKey
	Base      int64
	CanImport bool
	// Report is what the import read, as the CLI prints it; Refused where
	// the file was refused.
	Report        *server.ImportReport
	Refused       *formats.Note
	IgnoreUnknown bool
	ConfigID      string // keepalived's -i, for its @ID lines
}

func (p *Panel) importShow(w http.ResponseWriter, r *http.Request, u who) {
	p.showImport(w, r, u, http.StatusOK, &importData{}, nil)
}

func (p *Panel) showImport(w http.ResponseWriter, r *http.Request, u who, status int, d *importData, errs []string) {
	ctx := r.Context()
	d.Formats, d.Exports = formats.Formats()
	d.CanImport = u.Can("import")
	if _, err := p.core.Draft(ctx, u.User); err == nil {
		d.HasDraft = true
	}
	pg := p.newPage(ctx, r, u, "Import and export", "import")
	pg.Flash = takeFlash(w, r)
	pg.Errors = errs
	pg.Data = d
	p.render(w, r, status, "import", pg)
}

// importPreview parses an upload, keeps it as the user's draft and shows
// what applying it would change; nothing is stored as a revision yet.
func (p *Panel) importPreview(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	r.Body = http.MaxBytesReader(w, r.Body, maxUpload)
	d := &importData{Format: r.FormValue("format"), IgnoreUnknown: r.FormValue("ignore_unknown") != "", ConfigID: strings.TrimSpace(r.FormValue("config_id"))}
	file, hdr, err := r.FormFile("file")
	if err != nil {
		msg := "Choose a file to import."
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			msg = "The file is larger than 16 MB."
		}
		p.showImport(w, r, u, http.StatusUnprocessableEntity, d, []string{msg})
		return
	}
	defer file.Close()
	d.Name = path.Base(hdr.Filename)
	st, rep, err := server.ParseImportReport(d.Format, file, server.ImportOptions{IgnoreUnknown: d.IgnoreUnknown, ConfigID: d.ConfigID})
	if err != nil {
		var pe *formats.ParseError
		if errors.As(err, &pe) {
			d.Refused = &formats.Note{File: pe.File, Line: pe.Line, Msg: pe.Msg}
		}
		p.showImport(w, r, u, statusOf(err), d, []string{"The file was not imported: " + err.Error()})
		return
	}
	d.Report = rep
	cur, _, err := p.core.State(ctx)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	staged, err := p.core.StageState(ctx, p.actor(r, u), st)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	rev := staged.Base
	doc, err := server.EncodeState(st)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	d.Preview, d.Base, d.Imported = true, rev, st.Imported
	d.Changes = ipvsmgr.Changes(cur, st)
	if diff, err := p.core.Diff(ctx, bytes.NewReader(doc)); err != nil {
		d.DiffErr = err.Error()
	} else {
		d.Kernel = diff.Changes
	}
	p.showImport(w, r, u, http.StatusOK, d, nil)
}

// importApply applies the previewed import (the user's draft) as one revision.
func (p *Panel) importApply(w http.ResponseWriter, r *http.Request, u who) {
	label := "import --format " + r.PostFormValue("format") + " " + r.PostFormValue("name")
	p.applyDraft(w, r, u, label, "imported "+r.PostFormValue("name"))
}

func (p *Panel) exportDownload(w http.ResponseWriter, r *http.Request, u who) {
	format := r.URL.Query().Get("format")
	var b bytes.Buffer
	if err := p.core.Export(r.Context(), format, &b); err != nil {
		p.fail(w, r, u, err)
		return
	}
	name := map[string]string{"json": "ipvsctl-state.json", "ipvsadm": "ipvsadm.rules", "lvs.cf": "lvs.cf", "keepalived": "keepalived.conf", "ldirectord": "ldirectord.cf"}[format]
	ct := "text/plain; charset=utf-8"
	if strings.HasSuffix(name, ".json") {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	io.Copy(w, &b)
}
