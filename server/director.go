package server

import (
	"context"
	"io"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server/store"
)

// Director is the director the CLI talks to: every call its verbs make,
// answered by the Core in this process or by a daemon's over HTTP (package
// client), with the same results and the same errors. (It is not the HTTP
// API: that is package httpd, one of the two ways to serve it.)
type Director interface {
	Accounts // users and tokens (core_users.go)
	Charts(ctx context.Context, q ChartQuery) (*ChartSeries, error)
	State(ctx context.Context) (*ipvsmgr.State, int64, error)
	Apply(ctx context.Context, a Actor, doc io.Reader, label string, o WriteOptions) (*WriteResult, error)
	AddService(ctx context.Context, a Actor, svc ipvsmgr.Service, o WriteOptions) (*WriteResult, error)
	PatchService(ctx context.Context, a Actor, id string, p ServicePatch, o WriteOptions) (*WriteResult, error)
	RemoveService(ctx context.Context, a Actor, id string, o WriteOptions) (*WriteResult, error)
	SetServiceEnabled(ctx context.Context, a Actor, id string, on bool, o WriteOptions) (*WriteResult, error)
	AddServer(ctx context.Context, a Actor, svcID string, rs ipvsmgr.Server, o WriteOptions) (*WriteResult, error)
	PatchServer(ctx context.Context, a Actor, svcID, id string, p ServerPatch, o WriteOptions) (*WriteResult, error)
	RemoveServer(ctx context.Context, a Actor, svcID, id string, o WriteOptions) (*WriteResult, error)
	DrainServer(ctx context.Context, a Actor, svcID, id string, o WriteOptions) (*WriteResult, error)
	SetServerEnabled(ctx context.Context, a Actor, svcID, id string, on bool, o WriteOptions) (*WriteResult, error)
	SetSettings(ctx context.Context, a Actor, p SettingsPatch, o WriteOptions) (*WriteResult, error)
	Why(ctx context.Context, svcID, id string) (*Why, error)
	Drafts(ctx context.Context) ([]DraftInfo, error)
	DraftDocument(ctx context.Context, author string) ([]byte, error)
	DiffDraft(ctx context.Context, author string) (*DraftDiff, error)
	StartDraft(ctx context.Context, a Actor) (*DraftInfo, error)
	ApplyDraft(ctx context.Context, a Actor, label string, o WriteOptions) (*WriteResult, error)
	DiscardDraft(ctx context.Context, a Actor) error
	Rollback(ctx context.Context, a Actor, rev int64, o WriteOptions) (*WriteResult, error)
	Diff(ctx context.Context, doc io.Reader) (*DiffResult, error)
	Status(ctx context.Context) (*StatusView, error)
	History(ctx context.Context, limit int) ([]store.Revision, error)
	Revision(ctx context.Context, rev int64) (*RevisionDetail, error)
	Export(ctx context.Context, format string, w io.Writer) error
	Audit(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error)
	NodeSettings(ctx context.Context) (*NodeView, error)
	SetNode(ctx context.Context, a Actor, p NodePatch) (*NodeView, error)
	Health(ctx context.Context, q HealthQuery) ([]HealthReport, error)
	CheckServer(ctx context.Context, a Actor, svcID, id string) (*CheckResult, error)
	PrepareRealServers(ctx context.Context, a Actor, op string, sel RealServerSelection) (*RealServerReport, error)
	TuneRealServers(ctx context.Context, a Actor, op string, req RealServerTuneRequest) (*RealServerTuneReport, error)
	StartLoadRun(ctx context.Context, a Actor, s LoadRunStart) (*LoadRun, error)
	EndLoadRun(ctx context.Context, a Actor, id int64, res LoadResult) (*LoadRun, error)
	LoadRuns(ctx context.Context, test string) ([]LoadRun, error)
	ReadEvents(ctx context.Context, a Actor, after int64, f EventFilter) ([]Event, error)
	WatchEvents(ctx context.Context, a Actor, after int64, f EventFilter, fn func(Event) error) error
}

var _ Director = (*Core)(nil)
