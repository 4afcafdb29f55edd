package daemon

import (
	"net"
	"time"
)

// sdNotify tells systemd state (sd_notify(3): READY=1, STATUS=..., STOPPING=1)
// in one datagram to the unit's notify socket, NotifySocket (a name that
// begins with @ is in the abstract namespace, as Go's net package reads
// it). Without a socket there is no one to tell; a failure is logged, never
// fatal: the unit's start timeout is systemd's answer.
func (d *Daemon) sdNotify(state string) {
	if d.NotifySocket == "" {
		return
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: d.NotifySocket, Net: "unixgram"})
	if err != nil {
		d.Log.Warn("tell systemd", "state", state, "err", err)
		return
	}
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(state)); err != nil {
		d.Log.Warn("tell systemd", "state", state, "err", err)
	}
}
