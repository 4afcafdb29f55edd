package daemon

import (
	"cmp"
	"context"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/events"
)

// DefaultNotifyTimeout bounds a notify program's run, as a quorum program's.
const DefaultNotifyTimeout = DefaultQuorumTimeout

// notifyQueue bounds the programs waiting per subject: past it the oldest
// waiting one is dropped (logged), never the reconcile or VRRP held up.
const notifyQueue = 16

// notifier runs the notify programs of the document, keepalived's way: a
// real server's notify_up/notify_down as its checks find it up or down, the
// VRRP instance's notify_master|backup|fault|stop and then notify with
// keepalived's four arguments on each change of state. It follows the
// event log (so it never runs in the loops that publish), and runs the
// programs of one subject one at a time, in order, each with a timeout.
type notifier struct {
	d   *Daemon
	idx subjectIndex // the watch's goroutine only
}

type notifyRun struct {
	name string // notify_up, notify_master...
	argv []string
	for_ []any // what it runs for, for the log
}

// runNotify runs the notifier on the events after ID after until ctx
// ends, then waits for the programs under way (at most their timeout).
func (d *Daemon) runNotify(ctx context.Context, after int64) {
	n := &notifier{d: d}
	timeout := orDuration(d.NotifyTimeout, DefaultNotifyTimeout)
	// A program started runs to its end or its timeout, even as the daemon
	// stops (notify_stop), which waits for it.
	runCtx := context.WithoutCancel(ctx)
	q := newSerialQueue(notifyQueue, func(_ string, r notifyRun) { d.runProgram(runCtx, r.name, r.argv, timeout, r.for_...) },
		func(_ string, r notifyRun) {
			d.Log.Error("notify program dropped: too many waiting for its subject", append(r.for_, "program", r.name)...)
		})
	defer q.wait()
	f := server.EventFilter{Types: []string{"realserver.", events.VRRPState}}
	err := d.Core.WatchEvents(ctx, server.Actor{}, after, f, func(e server.Event) error {
		for _, r := range n.programsFor(e) {
			q.add(e.Subject, r)
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		d.Log.Error("notify programs: following the events", "err", err)
	}
}

// programsFor are the programs e calls for in the current desired state.
func (n *notifier) programsFor(e server.Event) []notifyRun {
	_, des := n.d.sk.newest()
	if des == nil {
		return nil
	}
	if e.Type == events.VRRPState {
		return vrrpPrograms(des.Settings.Redundancy, e)
	}
	n.idx.update(des)
	c := n.idx.servers[e.Subject]
	if c == nil {
		return nil
	}
	name, argv := "notify_down", c.NotifyDown
	if e.Type == events.ServerUp || e.Type == events.ServerBack {
		name, argv = "notify_up", c.NotifyUp
	}
	if len(argv) == 0 {
		return nil
	}
	return []notifyRun{{name: name, argv: argv, for_: []any{"server", e.Subject}}}
}

// vrrpPrograms are keepalived's (send_instance_notifies, then
// send_group_notifies): the state's own program as written, then notify
// with "INSTANCE" NAME STATE PRIORITY added; then the sync group's, its
// notify with "GROUP" NAME STATE 0 (vrrp_notify.c).
func vrrpPrograms(r *ipvsmgr.Redundancy, e server.Event) []notifyRun {
	if r == nil {
		return nil
	}
	state := strings.ToUpper(e.Fields["state"])
	instance := cmp.Or(r.Instance, ipvsmgr.DefaultInstance)
	why := []any{"instance", instance, "family", e.Fields["family"], "state", state}
	out := statePrograms(state, "", why, r.VRRPNotify, "INSTANCE", instance, e.Fields["priority"])
	if g := r.SyncGroup; g != nil {
		why := append(why, "group", g.Name)
		out = append(out, statePrograms(state, "group_", why, g.VRRPNotify, "GROUP", g.Name, "0")...)
	}
	return out
}

// statePrograms are the program of state (of master, backup, fault and
// stop) and then notify with TYPE NAME STATE PRIORITY added.
func statePrograms(state, prefix string, why []any, n ipvsmgr.VRRPNotify, typ, name, prio string) []notifyRun {
	byState := map[string]ipvsmgr.Argv{"MASTER": n.NotifyMaster, "BACKUP": n.NotifyBackup, "FAULT": n.NotifyFault, "STOP": n.NotifyStop}
	var out []notifyRun
	if argv := byState[state]; len(argv) > 0 {
		out = append(out, notifyRun{name: prefix + "notify_" + strings.ToLower(state), argv: argv, for_: why})
	}
	if len(n.Notify) > 0 {
		argv := append(append([]string(nil), n.Notify...), typ, name, state, prio)
		out = append(out, notifyRun{name: prefix + "notify", argv: argv, for_: why})
	}
	return out
}
