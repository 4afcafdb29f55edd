package server

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/formats"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// DiffResult is what a reconcile would change, changing nothing.
type DiffResult struct {
	// Changes are the IPVS changes as ipvsadm commands, then the VIP and
	// fwmark-rule changes as the commands that make them.
	Changes  []string           `json:"changes"`
	Retiring []ipvsmgr.Retiring `json:"retiring"`
}

// Diff is what making the kernel match the stored state (or doc, when not
// nil) would change.
func (c *Core) Diff(ctx context.Context, doc io.Reader) (*DiffResult, error) {
	if doc == nil {
		// The daemon's newest desired state, against its snapshot: no read
		// of the store or the kernel, whatever the number of viewers.
		if c.live != nil {
			if p, ok, err := c.live.PlanKnown(ctx); ok || err != nil {
				return diffResult(p), err
			}
		}
	}
	var st *ipvsmgr.State
	var err error
	if doc != nil {
		st, err = ipvsmgr.DecodeState(doc)
	} else {
		st, _, err = c.store.Current(ctx)
	}
	if err != nil {
		return nil, err
	}
	desired, err := ipvsmgr.Compile(st)
	if err != nil {
		return nil, err
	}
	p, err := c.rt.Plan(ctx, c.roleOverlay(desired))
	if err != nil {
		return nil, err
	}
	return diffResult(p), nil
}

func diffResult(p *ipvsmgr.Planned) *DiffResult {
	if p == nil {
		return nil
	}
	out := &DiffResult{Changes: []string{}, Retiring: p.Retiring}
	for _, op := range p.Ops {
		out.Changes = append(out.Changes, op.String())
	}
	out.Changes = append(out.Changes, p.Host...)
	return out
}

// History lists the latest revisions, newest first.
func (c *Core) History(ctx context.Context, limit int) ([]store.Revision, error) {
	revs, err := c.store.History(ctx, limit)
	if revs == nil {
		revs = []store.Revision{}
	}
	return revs, err
}

// RevisionDetail is one revision with what it changed.
type RevisionDetail struct {
	store.Revision
	Changes []string `json:"changes"`
}

// Revision returns revision rev and its changes from the one before.
func (c *Core) Revision(ctx context.Context, rev int64) (*RevisionDetail, error) {
	r, err := c.store.Revision(ctx, rev)
	if err != nil {
		return nil, err
	}
	prev := &ipvsmgr.State{}
	if rev > 1 {
		p, err := c.store.Revision(ctx, rev-1)
		if err != nil {
			return nil, err
		}
		prev = p.State
	}
	changes := ipvsmgr.Changes(prev, r.State)
	if changes == nil {
		changes = []string{}
	}
	return &RevisionDetail{Revision: *r, Changes: changes}, nil
}

// Export writes the stored state in a format.
func (c *Core) Export(ctx context.Context, format string, w io.Writer) error {
	st, _, err := c.store.Current(ctx)
	if err != nil {
		return err
	}
	n, err := c.store.Node(ctx)
	if err != nil {
		return err
	}
	var b bytes.Buffer // nothing is written when the format is unknown
	if err := formats.ExportWith(format, st, &b, formats.ExportOptions{Node: &formats.NodeHint{Priority: n.Priority, Role: n.Role}}); err != nil {
		return errorf(CodeBadInput, "%v", err)
	}
	_, err = w.Write(b.Bytes())
	return err
}

// ImportResult is a write made by an import, with what it could not map.
type ImportResult struct {
	*WriteResult
	Imported []ipvsmgr.ImportedKey `json:"imported"`
	// Report is what the import read (import_report.go).
	Report *ImportReport `json:"report,omitempty"`
}

// ParseImport reads another tool's configuration into a state, validated.
func ParseImport(format string, r io.Reader) (*ipvsmgr.State, error) {
	doc, _, err := ParseImportReport(format, r, ImportOptions{})
	return doc, err
}

// Restore is the boot-time restore: the modules and sysctls the stored state
// needs, then its VIPs, fwmark rules and services. What fails is listed and
// the rest is still done.
func (c *Core) Restore(ctx context.Context) (*WriteResult, error) {
	st, rev, err := c.store.Current(ctx)
	if err != nil {
		return nil, err
	}
	desired, err := ipvsmgr.Compile(st)
	if err != nil {
		return nil, fmt.Errorf("stored desired state (revision %d): %w", rev, err)
	}
	res := &WriteResult{Revision: rev}
	apply, release, err := c.rt.BeginWrite(ctx, WriteOptions{})
	if err != nil {
		return nil, err
	}
	defer release()
	if err := apply(ctx, res, desired, WriteOptions{NoWait: true}, nil); err != nil {
		if !isOpenError(err) {
			return res, err
		}
		res.Failures = append(res.Failures, ipvsmgr.Failure{Service: "kernel", Change: "open IPVS", Err: err.Error()})
	}
	return res, nil
}

// ChangesSince lists what changed from revision rev to the current one: what
// a writer whose change was based on rev did not see.
func (c *Core) ChangesSince(ctx context.Context, rev int64) ([]string, error) {
	old, err := c.store.Revision(ctx, rev)
	if err != nil {
		return nil, err
	}
	cur, _, err := c.store.Current(ctx)
	if err != nil {
		return nil, err
	}
	return ipvsmgr.Changes(old.State, cur), nil
}

// Audit lists audit records, newest first.
func (c *Core) Audit(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	entries, err := c.store.Audit(ctx, f)
	if entries == nil {
		entries = []store.AuditEntry{}
	}
	return entries, err
}

// CurrentRevision is the number of the stored desired state's revision.
func (c *Core) CurrentRevision(ctx context.Context) (int64, error) {
	return c.store.CurrentRevision(ctx)
}
