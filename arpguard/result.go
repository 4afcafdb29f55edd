package arpguard

import (
	"strings"
	"time"
)

// State is what ipvsctl last found on a real server.
type State string

const (
	StatePrepared    State = "prepared"
	StateDrift       State = "drift"
	StateUnreachable State = "unreachable"
	StateFailed      State = "failed"
	StateUndone      State = "undone"
)

// Result is the outcome of a push, verify or undo on one real server.
type Result struct {
	Target string `json:"target"`
	Host   string `json:"host"`
	Action string `json:"action"`
	State  State  `json:"state"`
	Detail string `json:"detail,omitempty"`
	// Changed lists the steps a push applied (none when the real server
	// was already prepared) or the journal records an undo reverted.
	Changed []string  `json:"changed,omitempty"`
	Drift   []string  `json:"drift,omitempty"`
	At      time.Time `json:"at"`
}

// Summary is the one-line status: "prepared", "drift: VIP 198.18.0.100
// missing on lo", "unreachable: ...", "failed: ..." or "undone".
func (r Result) Summary() string {
	switch {
	case r.State == StateDrift:
		return "drift: " + strings.Join(r.Drift, "; ")
	case r.Detail != "":
		return string(r.State) + ": " + r.Detail
	}
	return string(r.State)
}

// OK reports whether the action did what was asked.
func (r Result) OK() bool { return r.State == StatePrepared || r.State == StateUndone }
