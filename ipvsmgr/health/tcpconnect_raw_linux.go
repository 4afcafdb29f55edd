//go:build linux

package health

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The connector's system calls are made raw, without telling the runtime a
// system call is under way: each is on a non-blocking socket or epoll and
// never sleeps, but a connect runs the whole handshake's softirqs inline on a
// local or veth peer, long enough (under emulation, often) for the runtime's
// monitor to take the P away and wake another thread for it. At a thousand
// checks a second that hand-off, not the check, was a third of the daemon's
// CPU in the VM test bed.

func rawSocket(family int) (int, error) {
	fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, uintptr(family),
		unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// rawConnect starts a connect to target (an IPv6 address with scope zone).
func rawConnect(fd int, target netip.AddrPort, zone uint32) error {
	var e unix.Errno
	port := target.Port()
	if a := target.Addr(); a.Is4() || a.Is4In6() {
		sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.Unmap().As4()}
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		p[0], p[1] = byte(port>>8), byte(port)
		_, _, e = unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
	} else {
		sa := unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: a.As16(), Scope_id: zone}
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		p[0], p[1] = byte(port>>8), byte(port)
		_, _, e = unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
	}
	if e != 0 {
		return e
	}
	return nil
}

func rawClose(fd int) { unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0) }

// rawResetClose closes an established connection with a reset: the check has
// seen what it needed, and neither side keeps a TIME_WAIT for it.
func rawResetClose(fd int) {
	l := unix.Linger{Onoff: 1, Linger: 0}
	unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_LINGER,
		uintptr(unsafe.Pointer(&l)), unsafe.Sizeof(l), 0)
	rawClose(fd)
}

// rawSocketError reads a finished connect's result (SO_ERROR).
func rawSocketError(fd int) (unix.Errno, error) {
	var v int32
	n := uint32(unsafe.Sizeof(v))
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_ERROR,
		uintptr(unsafe.Pointer(&v)), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 {
		return 0, e
	}
	return unix.Errno(v), nil
}

func rawEpollCtl(epfd, op, fd int, ev *unix.EpollEvent) error {
	_, _, e := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd),
		uintptr(unsafe.Pointer(ev)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// rawEpollPoll returns the events ready now, without waiting.
func rawEpollPoll(epfd int, events []unix.EpollEvent) int {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0
	}
	return int(n)
}
