package daemon

import (
	"context"
	"os"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

// Alert kinds, and how one ended (OnAlert).
const (
	AlertSMTP    = "smtp"
	AlertWebhook = "webhook"

	AlertSent    = "sent"
	AlertFailed  = "failed"  // given up after its last attempt
	AlertDropped = "dropped" // dropped unsent from a full queue
)

const (
	// alertQueue bounds the alerts waiting per destination (the relay,
	// each webhook): past it the oldest waiting is dropped, logged and
	// counted.
	alertQueue = 1024
	// webhookAttempts bounds a post's attempts: 1 s, 2 s, 4 s, 8 s and
	// 16 s apart (AlertRetry).
	webhookAttempts = 6
	// alertStopGrace is how long a stopping daemon goes on sending what is
	// queued (each attempt once, no retry): the VRRP stop's mail.
	alertStopGrace = 5 * time.Second
)

// OnAlert calls f after each alert sent, given up or dropped, with its
// kind (AlertSMTP, AlertWebhook) and outcome (AlertSent, AlertFailed,
// AlertDropped): metrics. Set it before Run.
func (d *Daemon) OnAlert(f func(kind, outcome string)) { d.onAlert = f }

// alertRetry is the wait before attempt n+1 (n from 1): 1 s, doubled each
// time.
func alertRetry(n int) time.Duration { return time.Second << (n - 1) }

// alerter sends settings.alerts: mail as keepalived's smtp_alert sends it,
// and each webhook's posts. It follows the event log, as the notifier does
// (never in the loops that publish), and makes each alert at once from
// the desired state of the moment; the sending is queued per destination,
// one at a time, so a relay or a receiver that hangs holds up only its own
// alerts, each attempt bounded by its timeout.
type alerter struct {
	d    *Daemon
	host string
	idx  subjectIndex // the watch's goroutine only
	// mailed is the VRRP state last mailed, by family: keepalived mails a
	// state only when it differs (last_email_state).
	mailed map[string]string
	q      *serialQueue[alertJob]
	stats  deliveryStats
	// stopped is the daemon's: no retry once it ends. send is the
	// attempts': it ends the grace (AlertGrace) later.
	stopped, send context.Context
	retry         func(n int) time.Duration
	client        *webhookClient
}

// alertJob is one alert to deliver; try makes one attempt, and says
// whether a failed one is worth another.
type alertJob struct {
	kind, dest, what string
	attempts         int
	try              func(ctx context.Context) (retry bool, err error)
}

// runAlerts sends the alerts of the events after ID after until ctx
// ends, then what is queued for at most the grace (AlertGrace) more.
func (d *Daemon) runAlerts(ctx context.Context, after int64) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	send, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	grace := orDuration(d.AlertGrace, alertStopGrace)
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(grace, cancel) })
	defer stopGrace()
	a := &alerter{d: d, host: host, mailed: map[string]string{}, stopped: ctx, send: send,
		retry: alertRetry, client: newWebhookClient()}
	if d.AlertRetry != nil {
		a.retry = d.AlertRetry
	}
	a.q = newSerialQueue(alertQueue, a.deliver, func(_ string, j alertJob) {
		d.Log.Error("alert dropped unsent: too many waiting for its destination", "kind", j.kind, "to", j.dest, "alert", j.what,
			"queue", alertQueue)
		a.count(j, AlertDropped, nil)
	})
	defer a.q.wait()
	d.side.SetAlertSource(a.deliveries)
	err = d.Core.WatchEvents(ctx, server.Actor{}, after, server.EventFilter{}, func(e server.Event) error {
		a.take(e)
		return nil
	})
	if err != nil && ctx.Err() == nil {
		d.Log.Error("alerts: following the events", "err", err)
	}
}

// take queues the alerts e calls for in the current desired state.
func (a *alerter) take(e server.Event) {
	_, des := a.d.sk.newest()
	if des == nil || des.Settings.Alerts == nil {
		return
	}
	al := des.Settings.Alerts
	a.idx.update(des)
	if s := al.SMTP; s != nil {
		for _, m := range a.mailsFor(s, des, e) {
			a.q.add(AlertSMTP, alertJob{kind: AlertSMTP, dest: relayAddr(s), what: m.Subject, attempts: 1,
				try: func(ctx context.Context) (bool, error) { return false, sendMail(ctx, s, a.host, m) }})
		}
	}
	for i := range al.Webhooks {
		w := al.Webhooks[i]
		body, ok := webhookBody(&w, e, a.host, time.Now())
		if !ok {
			continue
		}
		a.q.add(webhookKey(i, w.URL), alertJob{kind: AlertWebhook, dest: w.URL, what: e.Type + " " + e.Subject,
			attempts: webhookAttempts, try: func(ctx context.Context) (bool, error) { return a.client.post(ctx, &w, body) }})
	}
}

// deliver makes a job's attempts, waiting a.retry between them, until one
// succeeds, one fails for good, the attempts run out or the daemon stops.
func (a *alerter) deliver(_ string, j alertJob) {
	log := a.d.Log.With("kind", j.kind, "to", j.dest, "alert", j.what)
	for n := 1; ; n++ {
		retry, err := j.try(a.send)
		if err == nil {
			log.Info("alert sent", "attempt", n)
			a.count(j, AlertSent, nil)
			return
		}
		if !retry || n >= j.attempts || a.stopped.Err() != nil {
			log.Error("alert not sent", "attempt", n, "err", err)
			a.count(j, AlertFailed, err)
			return
		}
		wait := a.retry(n)
		log.Warn("alert not sent; retrying", "attempt", n, "in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-a.stopped.Done():
			t.Stop()
			log.Error("alert not sent: the daemon stopped before its next attempt", "attempt", n)
			a.count(j, AlertFailed, err)
			return
		}
	}
}

// count tells OnAlert of how j ended, and keeps it as its destination's
// last result.
func (a *alerter) count(j alertJob, outcome string, err error) {
	a.stats.record(j.kind, j.dest, outcome, err, time.Now())
	if a.d.onAlert != nil {
		a.d.onAlert(j.kind, outcome)
	}
}

func webhookKey(i int, url string) string { return "webhook " + strconv.Itoa(i) + " " + url }

// deliveries are the destinations settings.alerts names now, each with
// how its alerts fared and how many wait (the core's AlertDeliveries).
func (a *alerter) deliveries() []server.AlertDelivery {
	_, des := a.d.sk.newest()
	if des == nil || des.Settings.Alerts == nil {
		return nil
	}
	al := des.Settings.Alerts
	var out []server.AlertDelivery
	if s := al.SMTP; s != nil {
		out = append(out, a.stats.get(AlertSMTP, relayAddr(s), a.q.waiting(AlertSMTP)))
	}
	for i, w := range al.Webhooks {
		out = append(out, a.stats.get(AlertWebhook, w.URL, a.q.waiting(webhookKey(i, w.URL))))
	}
	return out
}

// deliveryStats are the alerts' results by destination.
type deliveryStats struct {
	mu sync.Mutex
	by map[string]*server.AlertDelivery
}

func (s *deliveryStats) record(kind, dest, outcome string, err error, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.at(kind, dest)
	switch outcome {
	case AlertSent:
		d.Sent++
		d.LastOK = &now
	case AlertFailed:
		d.Failed++
		d.LastErrorAt = &now
		d.LastError = "not sent"
		if err != nil {
			d.LastError = err.Error()
		}
	case AlertDropped:
		d.Dropped++
	}
}

func (s *deliveryStats) at(kind, dest string) *server.AlertDelivery {
	if s.by == nil {
		s.by = map[string]*server.AlertDelivery{}
	}
	d := s.by[kind+" "+dest]
	if d == nil {
		d = &server.AlertDelivery{Kind: kind, Destination: dest}
		s.by[kind+" "+dest] = d
	}
	return d
}

// get is a copy of dest's results, queued the alerts waiting.
func (s *deliveryStats) get(kind, dest string, queued int) server.AlertDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := *s.at(kind, dest)
	d.Queued = queued
	return d
}

// subjectIndex finds a real server's and a service's compiled form by the
// subject of their events, in maps made once per desired state. The state
// is known by its checks' and quorums' arrays, which every copy of the
// Desired (current()'s, its health laid over) shares.
type subjectIndex struct {
	checks   *ipvsmgr.ServerCheck
	sorry    *ipvsmgr.SorryPolicy
	servers  map[string]*ipvsmgr.ServerCheck
	services map[string]*ipvsmgr.SorryPolicy
}

func (x *subjectIndex) update(des *ipvsmgr.Desired) {
	checks, sorry := unsafe.SliceData(des.Checks), unsafe.SliceData(des.Sorry)
	if x.servers != nil && checks == x.checks && sorry == x.sorry {
		return
	}
	x.checks, x.sorry = checks, sorry
	x.servers, x.services = make(map[string]*ipvsmgr.ServerCheck, len(des.Checks)), make(map[string]*ipvsmgr.SorryPolicy, len(des.Sorry))
	for i := range des.Checks {
		x.servers[des.Checks[i].Ref.String()] = &des.Checks[i]
	}
	for i := range des.Sorry {
		x.services[des.Sorry[i].Service.String()] = &des.Sorry[i]
	}
}
