package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// HealthHistoryLimit is how many transitions are kept per real server of a
// service; older ones are pruned as new ones come.
const HealthHistoryLimit = 100

// HealthTransition is one change of a real server's health in a service:
// its state, the weight the checks gave it, or a checker fault.
type HealthTransition struct {
	Ref    ipvsmgr.ServerRef
	At     time.Time
	From   ipvsmgr.HealthState
	To     ipvsmgr.HealthState
	Reason string
	// Weight, when WeightSet, is the weight the checks gave the server.
	Weight    uint32
	WeightSet bool
	Fault     string
}

func parseHealthState(s string) ipvsmgr.HealthState {
	switch s {
	case "up":
		return ipvsmgr.HealthUp
	case "down":
		return ipvsmgr.HealthDown
	}
	return ipvsmgr.HealthUnknown
}

// SaveHealthTransition records a change: it becomes the server's current
// health and joins its history (the oldest beyond HealthHistoryLimit go).
func (s *Store) SaveHealthTransition(ctx context.Context, tr HealthTransition) error {
	return s.SaveHealthTransitions(ctx, []HealthTransition{tr})
}

// SaveHealthTransitions records several changes, in order, in one
// transaction (a burst: a switch port down takes many servers with it).
func (s *Store) SaveHealthTransitions(ctx context.Context, trs []HealthTransition) error {
	if len(trs) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("save health of %s: %w", trs[0].Ref, busy(err))
	}
	defer tx.Rollback()
	// Three statements a transition, and a burst may be every server at once
	// (a daemon's first checks of 10,000): run them without the goroutine
	// the driver starts for each statement under a cancellable context.
	xctx := context.WithoutCancel(ctx)
	for _, tr := range trs {
		if err := saveHealthTransition(xctx, tx, tr); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("save health of %s: %w", trs[0].Ref, busy(err))
	}
	return nil
}

func saveHealthTransition(ctx context.Context, tx *sql.Tx, tr HealthTransition) error {
	svc, srv := tr.Ref.Service.String(), tr.Ref.Server.String()
	at := tr.At.UTC().Format(time.RFC3339Nano)
	var weight sql.NullInt64
	if tr.WeightSet {
		weight = sql.NullInt64{Int64: int64(tr.Weight), Valid: true}
	}
	// since moves only when the state does: a weight or fault change keeps it.
	if _, err := tx.ExecContext(ctx, `INSERT INTO health_current (service, server, state, since, reason, weight, fault)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (service, server) DO UPDATE SET
			since = CASE WHEN state = excluded.state THEN since ELSE excluded.since END,
			state = excluded.state, reason = excluded.reason, weight = excluded.weight, fault = excluded.fault`,
		svc, srv, tr.To.String(), at, tr.Reason, weight, tr.Fault); err != nil {
		return fmt.Errorf("save health of %s: %w", tr.Ref, busy(err))
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO health_transitions (service, server, at, from_state, to_state, reason, weight, fault)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, svc, srv, at, tr.From.String(), tr.To.String(), tr.Reason, weight, tr.Fault); err != nil {
		return fmt.Errorf("record health transition of %s: %w", tr.Ref, busy(err))
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM health_transitions WHERE service = ? AND server = ? AND id <= (
		SELECT id FROM health_transitions WHERE service = ? AND server = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
		svc, srv, svc, srv, HealthHistoryLimit); err != nil {
		return fmt.Errorf("prune health history of %s: %w", tr.Ref, busy(err))
	}
	return nil
}

// CurrentHealth returns every recorded server's current health (From is
// not set; At is since when it has been in that state).
func (s *Store) CurrentHealth(ctx context.Context) (map[ipvsmgr.ServerRef]HealthTransition, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT service, server, state, since, reason, weight, fault FROM health_current`)
	if err != nil {
		return nil, fmt.Errorf("read current health: %w", busy(err))
	}
	defer rows.Close()
	out := map[ipvsmgr.ServerRef]HealthTransition{}
	for rows.Next() {
		var svc, srv, state, since string
		var tr HealthTransition
		var weight sql.NullInt64
		if err := rows.Scan(&svc, &srv, &state, &since, &tr.Reason, &weight, &tr.Fault); err != nil {
			return nil, fmt.Errorf("read current health: %w", err)
		}
		if err := parseRef(svc, srv, &tr.Ref); err != nil {
			return nil, err
		}
		tr.To = parseHealthState(state)
		tr.At, _ = time.Parse(time.RFC3339Nano, since)
		tr.Weight, tr.WeightSet = uint32(weight.Int64), weight.Valid
		out[tr.Ref] = tr
	}
	return out, rows.Err()
}

// HealthHistory returns a server's transitions in a service, newest first,
// at most limit of them.
func (s *Store) HealthHistory(ctx context.Context, service ipvsmgr.ServiceKey, server ipvsmgr.DestKey, limit int) ([]HealthTransition, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT at, from_state, to_state, reason, weight, fault FROM health_transitions
		WHERE service = ? AND server = ? ORDER BY id DESC LIMIT ?`, service.String(), server.String(), limit)
	if err != nil {
		return nil, fmt.Errorf("read health history: %w", busy(err))
	}
	defer rows.Close()
	var out []HealthTransition
	for rows.Next() {
		tr := HealthTransition{Ref: ipvsmgr.ServerRef{Service: service, Server: server}}
		var at, from, to string
		var weight sql.NullInt64
		if err := rows.Scan(&at, &from, &to, &tr.Reason, &weight, &tr.Fault); err != nil {
			return nil, fmt.Errorf("read health history: %w", err)
		}
		tr.At, _ = time.Parse(time.RFC3339Nano, at)
		tr.From, tr.To = parseHealthState(from), parseHealthState(to)
		tr.Weight, tr.WeightSet = uint32(weight.Int64), weight.Valid
		out = append(out, tr)
	}
	return out, rows.Err()
}

func parseRef(svc, srv string, ref *ipvsmgr.ServerRef) error {
	if err := ref.Service.UnmarshalText([]byte(svc)); err != nil {
		return fmt.Errorf("stored health: %w", err)
	}
	if err := ref.Server.UnmarshalJSON(fmt.Appendf(nil, "%q", srv)); err != nil {
		return fmt.Errorf("stored health: %w", err)
	}
	return nil
}
