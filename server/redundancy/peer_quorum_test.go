package redundancy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ipvsctl/ipvsctl/server"
)

const quorumState = `{"services": [{"name": "web", "address": "198.18.0.100", "port": 80, "scheduler": "rr",
   "quorum_down": ["/bin/sh", "-c", "echo lost"],
   "servers": [{"name": "r1", "address": "198.18.0.11"}]}]}`

const notifyState = `{"services": [{"name": "web", "address": "198.18.0.100", "port": 80, "scheduler": "rr",
   "servers": [{"name": "r1", "address": "198.18.0.11", "notify_down": ["/bin/sh", "-c", "echo down"]}]}]}`

const groupState = `{"settings": {"redundancy": {"vrid": 51, "interface": "eth0",
   "sync_group": {"name": "G", "notify": ["/bin/sh", "-c", "echo group"]}}},
   "services": [{"name": "web", "address": "198.18.0.100", "port": 80, "scheduler": "rr",
   "servers": [{"name": "r1", "address": "198.18.0.11"}]}]}`

// A peer's document that brings a quorum_up or quorum_down program, or a
// notify program of a real server or of the VRRP sync group (run as root, as
// an exec check) is refused, naming the
// field, until this director allows replicated exec; then it is taken.
func TestPinnedPeerQuorumProgramsGated(t *testing.T) {
	for doc, field := range map[string]string{quorumState: "services[web].quorum_down", notifyState: "services[web].servers[r1].notify_down",
		groupState: "settings.redundancy.sync_group.notify"} {
		t.Run(field, func(t *testing.T) { peerProgramGated(t, doc, field) })
	}
}

func peerProgramGated(t *testing.T, doc, field string) {
	ctx := context.Background()
	cert, fp := identity(t)
	evil := newRogue(t, doc, time.Now(), &cert)
	d := newDirector(t, "198.18.0.3", 100)
	follow(t, d, "https://"+evil.srv.Listener.Addr().String(), fp)
	d.start(&hub{}, nil)
	eventually(t, 5*time.Second, "the program refused in the status", func() bool {
		return strings.Contains(replicationError(d), field)
	})
	r := d.status()
	if len(r.Replication.Conflicts) != 1 || !strings.Contains(r.Replication.Conflicts[0].Lost, "allow-replicated-exec") {
		t.Fatalf("conflicts shown: %+v", r.Replication.Conflicts)
	}
	if h := d.head(); h.Revision != 0 {
		t.Fatalf("the quorum program was stored: %+v", h)
	}
	if _, err := d.core.SetNode(ctx, admin, server.NodePatch{AllowReplicatedExec: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the quorum program taken once allowed", func() bool {
		return d.head().Hash == evil.hash()
	})
	d.stop()
}
