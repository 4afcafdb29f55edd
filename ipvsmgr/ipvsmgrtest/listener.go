package ipvsmgrtest

import "net"

// AcceptAndClose accepts each connection to ln and closes it at once, until
// ln is closed: a real server for tcp checks.
func AcceptAndClose(ln net.Listener) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}
