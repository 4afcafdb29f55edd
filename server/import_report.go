package server

import (
	"context"
	"fmt"
	"io"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/formats"
)

// ImportReport is what an import read, as `ipvsctl import` prints it: the
// summary line ("N virtual services, M real servers, K kept"), each fix the
// format's tool makes with a warning and each unknown keyword passed over
// under IgnoreUnknown, with their lines.
type ImportReport struct {
	Summary  string         `json:"summary"`
	Services int            `json:"services"`
	Servers  int            `json:"servers"`
	Kept     int            `json:"kept"`
	Warnings []formats.Note `json:"warnings"`
	Ignored  []formats.Note `json:"ignored"`
	// Node is what the file says of this director's own settings (a
	// keepalived vrrp_instance's priority): set with the import, except
	// into a draft, which holds only the shared document.
	Node *formats.NodeHint `json:"node,omitempty"`
}

// ImportOptions are the import's own choices (the CLI's flags of the same
// names).
type ImportOptions struct {
	// IgnoreUnknown goes on past keywords the format's tool does not know.
	IgnoreUnknown bool
	// AllowEmpty lets an import with no virtual services replace a state
	// that has some.
	AllowEmpty bool
	// ConfigID is keepalived's configuration id (its -i): which @ID lines
	// are read; empty, this host's name up to its first dot.
	ConfigID string
}

func importReportOf(rep *formats.Report) *ImportReport {
	return &ImportReport{Summary: rep.Summary(), Services: rep.Services, Servers: rep.Servers, Kept: rep.Kept,
		Warnings: rep.Warnings, Ignored: rep.Ignored, Node: rep.Node}
}

// ParseImportReport reads another tool's configuration into a validated
// state, with its report. A file the importer refuses at a line is a
// *formats.ParseError (CodeBadInput), so that the API and the panel can
// name the line; nothing is read from the director's files (an include is
// refused by its line).
func ParseImportReport(format string, r io.Reader, o ImportOptions) (*ipvsmgr.State, *ImportReport, error) {
	doc, rep, err := formats.ImportWith(format, r, formats.Options{IgnoreUnknown: o.IgnoreUnknown, ConfigID: o.ConfigID})
	if err != nil {
		if CodeOf(err) == CodeInternal {
			return nil, nil, &Error{Code: CodeBadInput, Msg: err.Error()}
		}
		return nil, nil, err
	}
	if _, err := ipvsmgr.Compile(doc); err != nil {
		return nil, nil, err
	}
	return doc, importReportOf(rep), nil
}

// ImportWith replaces the desired state with another tool's configuration
// (POST /api/v1/import), its result carrying the report: the file is read,
// refused whole if the tool would refuse it or if it would empty a state
// that has services (unless AllowEmpty), then stored and reconciled.
func (c *Core) ImportWith(ctx context.Context, a Actor, format, name string, r io.Reader, imp ImportOptions, o WriteOptions) (*ImportResult, error) {
	doc, rep, err := ParseImportReport(format, r, imp)
	if err != nil {
		return nil, err
	}
	cur, _, err := c.State(ctx)
	if err != nil {
		return nil, err
	}
	if err := formats.CheckReplace(cur, doc, imp.AllowEmpty); err != nil {
		return nil, &Error{Code: CodeBadInput, Msg: err.Error()}
	}
	res, err := c.applyState(ctx, a, "apply", doc, fmt.Sprintf("import --format %s %s", format, name), o)
	if err != nil {
		return nil, err
	}
	if n := rep.Node; n != nil && !o.Draft {
		if _, err := c.SetNode(ctx, a, NodePatch{Priority: &n.Priority, Role: &n.Role}); err != nil {
			return nil, fmt.Errorf("the import is stored, its node settings are not: %w", err)
		}
	}
	imported := doc.Imported
	if imported == nil {
		imported = []ipvsmgr.ImportedKey{}
	}
	return &ImportResult{WriteResult: res, Imported: imported, Report: rep}, nil
}
