// Package nstest runs a function inside a named network namespace, for the
// tests that open sockets in namespaces they made.
package nstest

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Do runs f on a thread moved into namespace name: the sockets f opens stay
// there. The thread goes back to its namespace afterwards and lives on: a
// thread that ended would fire the PR_SET_PDEATHSIG of every process started
// from it (keepalived, a daemon under test), killing it mid-test. Only a
// thread that cannot go back stays locked, to end with its goroutine.
func Do(name string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		h, err := netns.GetFromName(name)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open network namespace %s: %w", name, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- fmt.Errorf("enter network namespace %s: %w", name, err)
			return
		}
		err = f()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}
