package health

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// checkExec runs the command (never through a shell) in its own process
// group: at the timeout the whole group is killed, so a child it forked
// cannot outlive the check.
func checkExec(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	cmd := exec.CommandContext(ctx, spec.Command[0], spec.Command[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Output goes to /dev/null: no pipe a lingering child could hold open.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return fault("cannot run " + spec.Command[0] + ": " + startError(err))
	}
	err := cmd.Wait()
	// The leader is gone; anything it left behind in its group goes too.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if ctx.Err() != nil {
		return fail("timeout after " + spec.Timeout.String())
	}
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return fault(shorten(err.Error()))
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fail("killed by signal " + ws.Signal().String())
		}
		code = ee.ExitCode()
	}
	status := "exit status " + strconv.Itoa(code)
	switch {
	case code == 0:
		return pass(status)
	case spec.DynamicWeight && code >= 2 && code <= 255:
		r := pass(status)
		r.Weight = code - 2
		return r
	}
	return fail(status)
}

func startError(err error) string {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, syscall.ENOENT):
		return "not found"
	case errors.Is(err, syscall.EACCES):
		return "permission denied"
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.ENOMEM):
		return "cannot fork (out of processes or memory)"
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "out of file descriptors"
	}
	return shorten(err.Error())
}
