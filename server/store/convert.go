package store

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// conversions are the migrations' steps that change documents, by version.
func (s *Store) conversions() map[int]func(ctx context.Context, tx *sql.Tx) error {
	return map[int]func(ctx context.Context, tx *sql.Tx) error{10: s.convertDrained, 17: s.convertBGPPasswords}
}

// drainHistory is how many revisions convertDrained reads for a weight.
const drainHistory = 100

// convertDrained makes each real server that a drain left at weight 0 a
// drained one with its weight back (0010_server_drained.sql says why).
func (s *Store) convertDrained(ctx context.Context, tx *sql.Tx) error {
	var base int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM revisions`).Scan(&base); err != nil || base == 0 {
		return err
	}
	st, _, err := s.Current(ctx)
	if err != nil {
		return err
	}
	zero := map[[2]string]*ipvsmgr.Server{} // (service, server) at weight 0, not drained
	for i := range st.Services {
		svc := &st.Services[i]
		for j := range svc.Servers {
			if rs := &svc.Servers[j]; rs.EffectiveWeight() == 0 && !rs.Drained {
				zero[serverKey(svc, rs)] = rs
			}
		}
	}
	if len(zero) == 0 {
		return nil
	}
	restored := map[[2]string]bool{}
	for id := base - 1; id >= max(1, base-drainHistory) && len(restored) < len(zero); id-- {
		r, err := s.Revision(ctx, id)
		if err != nil {
			return fmt.Errorf("read revision %d: %w", id, err)
		}
		for i := range r.State.Services {
			svc := &r.State.Services[i]
			for j := range svc.Servers {
				old := &svc.Servers[j]
				k := serverKey(svc, old)
				if rs := zero[k]; rs != nil && !restored[k] && old.EffectiveWeight() > 0 {
					rs.Weight, rs.Drained, restored[k] = old.Weight, true, true
				}
			}
		}
	}
	if len(restored) == 0 {
		return nil
	}
	names := make([]string, 0, len(restored))
	for k := range restored {
		names = append(names, k[0]+"/"+k[1])
	}
	sort.Strings(names)
	doc, err := Encode(st)
	if err != nil {
		return err
	}
	_, _, err = commitTx(ctx, tx, base, doc, nil, "ipvsctl", "migration",
		"migration 0010: drained with their weight kept: "+strings.Join(names, ", "))
	return err
}

// serverKey names a real server across revisions: its service's name (or
// key) and its own name (or address and port).
func serverKey(svc *ipvsmgr.Service, rs *ipvsmgr.Server) [2]string {
	sid := svc.Name
	if sid == "" {
		sid = fmt.Sprintf("%s:%s:%d:%d", svc.Protocol, svc.Address, svc.Port, svc.FWMark)
	}
	id := rs.Name
	if id == "" {
		id = fmt.Sprintf("%s:%d", rs.Address, rs.Port)
	}
	return [2]string{sid, id}
}
