// Package regularfile opens files the daemon is told to read (a file
// check's file, a VRRP key, a token file) so that no file can hang it: a
// FIFO with no writer, a device, a socket are refused, and an open that
// does not return in time (a dead network mount) is given up.
package regularfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// Timeout is how long Open waits for the open itself.
const Timeout = 2 * time.Second

// Open opens path for reading without blocking (O_NONBLOCK: a FIFO's open
// returns at once), refuses anything but a regular file (from fstat of
// what was opened, not a stat of the name that could change), and gives up
// after timeout (Timeout if 0). Its errors name the path and what it is.
func Open(path string, timeout time.Duration) (*os.File, error) {
	if timeout <= 0 {
		timeout = Timeout
	}
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
		if err == nil {
			err = checkRegular(f, path)
			if err != nil {
				f.Close()
				f = nil
			}
		}
		ch <- opened{f, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case o := <-ch:
		return o.f, o.err
	case <-t.C:
		go func() { // the open may yet return: close what it gives
			if o := <-ch; o.f != nil {
				o.f.Close()
			}
		}()
		return nil, fmt.Errorf("%s: not opened within %s", path, timeout)
	}
}

// ErrNotRegular is what Open's error wraps for a file that is not regular.
var ErrNotRegular = errors.New("not a regular file")

func checkRegular(f *os.File, path string) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: %w (it is a %s)", path, ErrNotRegular, kind(st.Mode()))
	}
	return nil // reads of a regular file never block, O_NONBLOCK or not
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	}
	return "file of mode " + m.String()
}
