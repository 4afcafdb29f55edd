package main

import (
	"fmt"
	"log/slog"
	"os"
	"syscall"

	"github.com/ipvsctl/ipvsctl/server/redundancy"
)

// faultKillEnv names the takeover step at which serve kills itself with
// SIGKILL: the fault matrix's injection point (scripts/vmtest), set on one
// daemon of a test pair, never in production. Unset: nothing.
const faultKillEnv = "IPVSCTL_FAULT_KILL_AT"

func faultKillAt(env *cliEnv) (redundancy.TakeoverStep, bool) {
	step, err := redundancy.ParseTakeoverStep(env.getenv(faultKillEnv))
	if err != nil {
		fmt.Fprintf(env.stderr, "ipvsctl serve: %s: %v\n", faultKillEnv, err)
		return "", false
	}
	return step, true
}

// killAtStep is the redundancy hook that kills this process at step (nil
// when step is none).
func killAtStep(step redundancy.TakeoverStep, log *slog.Logger) func(redundancy.TakeoverStep) {
	if step == "" {
		return nil
	}
	log.Warn("this daemon kills itself with SIGKILL at a takeover step (fault injection)", "env", faultKillEnv, "step", string(step))
	return func(at redundancy.TakeoverStep) {
		if at != step {
			return
		}
		log.Warn("fault injection: SIGKILL at the takeover step", "step", string(at))
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal ends the process before this returns
	}
}
