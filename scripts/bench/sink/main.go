// Command sink is the health benchmark's real servers: one TCP listener on
// every address of its namespace that accepts each connection and closes it,
// until it has run for -for (bounded).
package main

import (
	"flag"
	"log"
	"net"
	"time"
)

func main() {
	addr := flag.String("listen", ":80", "address to listen on")
	d := flag.Duration("for", 5*time.Minute, "stop after this long")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	time.AfterFunc(*d, func() { ln.Close() })
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}
