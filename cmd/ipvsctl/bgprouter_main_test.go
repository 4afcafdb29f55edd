package main

import (
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr/bgp/bgptest"
)

// TestMain lets bgptest.StartRouter run its GoBGP router in a child
// process: two GoBGP servers in one process race on GoBGP's package
// variables.
func TestMain(m *testing.M) { bgptest.Main(m) }
