package redundancy

import (
	"fmt"
	"strings"
)

// TakeoverStep names a point of a takeover (backup to master) at which the
// fault matrix kills the daemon (RedundancyHooks.AtStep), to prove that a
// daemon dying there is put right by its restart: the VIP is on the link
// once and established connections live on.
type TakeoverStep string

const (
	// StepVIPAdded: the family's VIPs are up on the interface; no advert
	// or gratuitous ARP has gone out, nothing is written to the ledger (its
	// intent covers the VIPs).
	StepVIPAdded TakeoverStep = "vip-added"
	// StepBeforeLedger: the first advert and gratuitous ARPs are out; the
	// ledger does not record the VIPs yet.
	StepBeforeLedger TakeoverStep = "before-ledger"
	// StepSyncSwitch: the backup sync daemon is stopped, the master one
	// not started yet.
	StepSyncSwitch TakeoverStep = "sync-switch"
)

// TakeoverSteps are the steps, in the order a takeover passes them.
func TakeoverSteps() []TakeoverStep {
	return []TakeoverStep{StepVIPAdded, StepBeforeLedger, StepSyncSwitch}
}

// ParseTakeoverStep reads a step's name ("" is none).
func ParseTakeoverStep(s string) (TakeoverStep, error) {
	if s == "" {
		return "", nil
	}
	steps := TakeoverSteps()
	for _, st := range steps {
		if string(st) == s {
			return st, nil
		}
	}
	names := make([]string, len(steps))
	for i, st := range steps {
		names[i] = string(st)
	}
	return "", fmt.Errorf("%q is not a takeover step (%s)", s, strings.Join(names, ", "))
}

// atStep tells the hook, if any, that a takeover reached step.
func (r *redRunner) atStep(step TakeoverStep) {
	if r.h.AtStep != nil {
		r.h.AtStep(step)
	}
}
