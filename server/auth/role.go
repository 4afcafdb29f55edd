package auth

import "fmt"

// Role is what a user may do. Viewer reads everything; operator may also
// drain, enable and disable real servers and change weights; admin does
// everything (settings, services, import, rollback, users). Public marks a
// route that needs no login (the login page, /healthz, static assets).
type Role int

const (
	// roleUnset is a route whose role nobody declared: Register refuses it.
	roleUnset Role = iota
	Public
	Viewer
	Operator
	Admin
)

func (r Role) String() string {
	switch r {
	case Public:
		return "public"
	case Viewer:
		return "viewer"
	case Operator:
		return "operator"
	case Admin:
		return "admin"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// MarshalText writes a role by name (JSON, the store).
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// ParseRole reads a user's role: admin, operator or viewer.
func ParseRole(s string) (Role, error) {
	switch s {
	case "admin":
		return Admin, nil
	case "operator":
		return Operator, nil
	case "viewer":
		return Viewer, nil
	}
	return roleUnset, &InvalidError{Field: "role", Message: fmt.Sprintf("%q is not a role (want admin, operator or viewer)", s)}
}

// Allows reports whether a user with role have may do what needs role need:
// viewer < operator < admin; anyone may reach a Public route.
func Allows(have, need Role) bool {
	if need == Public {
		return true
	}
	return need >= Viewer && have >= need
}
