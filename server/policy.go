package server

import (
	"fmt"

	"github.com/ipvsctl/ipvsctl/server/auth"
)

// Rule is one action and the least role that may do it. Every entry point
// reads this one table: the core refuses an actor below it, the API's
// routes and the panel's pages are guarded by it, and the CLI's client
// learns the refusal through the one code-to-status mapping (StatusOf).
type Rule struct {
	Action string
	Role   auth.Role
}

// Policy is every audited action with its least role.
func Policy() []Rule {
	const v, o, a = auth.Viewer, auth.Operator, auth.Admin
	return []Rule{
		{"apply", a}, {"import", a}, {"rollback", a}, {"settings", a},
		{"vs add", a}, {"vs set", a}, {"vs rm", a}, {"vs enable", a}, {"vs disable", a},
		{"rs add", a}, {"rs rm", a},
		// "rs set" needs an admin unless it changes only OperatorServerFields.
		{"rs set", o},
		{"rs drain", o}, {"rs enable", o}, {"rs disable", o}, {"rs check", o},
		{"draft stage", a}, {"draft apply", a}, {"draft discard", a}, {"draft show", v},
		{"why", v}, {"events", v}, {"node set", a}, {"realserver", a}, {"realserver tune", a},
		{"loadtest start", a}, {"loadtest end", a},
		{"users", a}, {"user add", a}, {"user set", a}, {"user passwd", a}, {"user rm", a},
		{"token create", a}, {"token revoke", a}, {"audit", a},
	}
}

// RoleFor is the least role that may do action (admin for one the table
// does not list: what is not named is not given away).
func RoleFor(action string) auth.Role {
	for _, r := range Policy() {
		if r.Action == action {
			return r.Role
		}
	}
	return auth.Admin
}

// OperatorServerFields are the real-server fields an operator may change
// (rs set, PATCH .../servers/{sid}, the panel's server form): its weight,
// its admin state and its forced health. Anything else needs an admin.
func OperatorServerFields() []string { return []string{"weight", "enabled", "drained", "health"} }

// operatorPatch reports whether p changes only OperatorServerFields.
func operatorPatch(p ServerPatch) bool {
	p.Weight, p.Enabled, p.Drained, p.Health = nil, nil, nil, nil
	return p == ServerPatch{}
}

// allow refuses an actor whose role is below need. An actor without a role
// is a caller in this process trusted with the database (the CLI without a
// daemon, replication, restore): the API and the panel always give one.
func allow(a Actor, action string, need auth.Role) error {
	if a.Role == 0 || auth.Allows(a.Role, need) {
		return nil
	}
	return errorf(CodeForbidden, "%s is %s: %s needs the %s role", orDefault(a.Name, "this user"), article(a.Role), action, need)
}

func article(r auth.Role) string {
	if r == auth.Admin || r == auth.Operator {
		return fmt.Sprintf("an %s", r)
	}
	return fmt.Sprintf("a %s", r)
}
