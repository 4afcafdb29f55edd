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

// maxExecOutput is how much of a program's output an exec check with an
// expect compares: nanny reads one 4 KiB buffer.
const maxExecOutput = 4095

// checkExec runs the command (never through a shell) in its own process
// group: at the timeout the whole group is killed, so a child it forked
// cannot outlive the check. With an expect, the program must also print
// it (Piranha's send_program with expect).
func (c *Checker) checkExec(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	cmd := exec.CommandContext(ctx, spec.Command[0], spec.Command[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Without an expect, output goes to /dev/null: no pipe a lingering
	// child could hold open. With one, WaitDelay bounds the wait for it.
	var out cappedBuffer
	if spec.Expect != "" {
		cmd.Stdout = &out
	}
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
	case code == 0 && spec.Expect != "":
		return c.execOutput(spec, out.b)
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

// execOutput compares a program's output with the check's expect as nanny
// compares it: the output less its last character (nanny chops the final
// newline) equal to expect, or with use_regex matching it; "*" any output.
func (c *Checker) execOutput(spec *ipvsmgr.CheckSpec, b []byte) Result {
	got := string(b)
	if got != "" {
		got = got[:len(got)-1]
	}
	switch {
	case spec.Expect == "*" && len(b) > 0:
		return pass("output " + quoteStart(b))
	case spec.UseRegex:
		re, err := c.compiled(spec.Expect)
		if err != nil {
			return fault("expect: " + err.Error())
		}
		if re.MatchString(got) {
			return pass("output " + quoteStart(b))
		}
	case got == spec.Expect:
		return pass("output " + quoteStart(b))
	}
	if len(b) == 0 {
		return fail("no output, expected " + strconv.Quote(shorten(spec.Expect)))
	}
	return fail("output " + quoteStart(b) + " is not the expected " + strconv.Quote(shorten(spec.Expect)))
}

// cappedBuffer keeps the first maxExecOutput bytes written to it and
// discards the rest, so a chatty program cannot fill memory.
type cappedBuffer struct{ b []byte }

func (w *cappedBuffer) Write(p []byte) (int, error) {
	if room := maxExecOutput - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}
