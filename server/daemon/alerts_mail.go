package daemon

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
	"github.com/ipvsctl/ipvsctl/server/events"
)

// alertMail is one mail: its subject and body as keepalived writes them.
type alertMail struct{ Subject, Body string }

// mailsFor are the mails e calls for, in the order keepalived sends them.
func (a *alerter) mailsFor(s *ipvsmgr.SMTPAlerts, des *ipvsmgr.Desired, e server.Event) []alertMail {
	if e.Type == events.VRRPState {
		return a.vrrpMails(s, des.Settings.Redundancy, e)
	}
	if m, ok := a.mailFor(s, e); ok {
		return []alertMail{m}
	}
	return nil
}

// mailFor is the mail e calls for, keepalived's way (smtp_alert): a real
// server's up and down (its checker's words, check_tcp.c), a service's
// quorum (ipwrapper.c), the VRRP instance's states (vrrp_notify.c), each
// as its smtp_alert and the global switches say (SMTPAlerts.For*); the
// VRRP states' are vrrpMails.
func (a *alerter) mailFor(s *ipvsmgr.SMTPAlerts, e server.Event) (alertMail, bool) {
	var subject, body string
	switch e.Type {
	case events.ServerDown, events.ServerQuiesced, events.ServerUp, events.ServerBack:
		c := a.idx.servers[e.Subject]
		if c == nil || !s.ForServer(c.SMTPAlert) {
			return alertMail{}, false
		}
		up := e.Type == events.ServerUp || e.Type == events.ServerBack
		subject = fmt.Sprintf("Realserver %s of virtual server %s - %s", fmtRS(c.Ref), fmtVS(c.Ref.Service), upDown(up))
		body = checkBody(c.Spec.Type, up, e.Fields["reason"])
	case events.QuorumLost, events.QuorumRegained:
		p := a.idx.services[e.Subject]
		if p == nil || !s.ForService(p.SMTPAlert) {
			return alertMail{}, false
		}
		up := e.Type == events.QuorumRegained
		subject = fmt.Sprintf("Virtualserver %s - %s", fmtVS(p.Service), upDown(up))
		body = quorumBody(up, e.Fields["at_start"] == "true", p.Quorum, p.Hysteresis, e.Fields["healthy"])
	default:
		return alertMail{}, false
	}
	return a.mail(s, subject, body), true
}

// mail is a mail with keepalived's subject: "[router_id] " first.
func (a *alerter) mail(s *ipvsmgr.SMTPAlerts, subject, body string) alertMail {
	return alertMail{Subject: "[" + cmp.Or(s.RouterID, a.host) + "] " + subject, Body: body}
}

// vrrpMails are the mails of a VRRP change: the instance's
// (vrrp_smtp_notifier), then its sync group's (vrrp_sync_smtp_notifier),
// each sent only for a state that differs from the one it last mailed
// (keepalived's last_email_state).
func (a *alerter) vrrpMails(s *ipvsmgr.SMTPAlerts, r *ipvsmgr.Redundancy, e server.Event) []alertMail {
	state := strings.ToUpper(e.Fields["state"])
	if r == nil || state == "FAULT" && s.NoEmailFaults {
		return nil
	}
	var out []alertMail
	send := func(key string, own *bool, subject string, what map[string][2]string) {
		m, ok := what[state]
		if !ok || !s.ForVRRP(own) || a.mailed[key] == state {
			return
		}
		a.mailed[key] = state
		out = append(out, a.mail(s, subject+" - "+m[0], m[1]))
	}
	send(e.Fields["family"], r.SMTPAlert, "VRRP Instance "+cmp.Or(r.Instance, ipvsmgr.DefaultInstance), vrrpMail)
	if g := r.SyncGroup; g != nil {
		send("group "+e.Fields["family"], g.SMTPAlert, "VRRP Group "+g.Name, groupMail)
	}
	return out
}

// vrrpMail are vrrp_smtp_notifier's subjects and bodies, by state.
var vrrpMail = map[string][2]string{
	"MASTER": {"Entering MASTER state", "=> VRRP Instance is now owning VRRP VIPs <="},
	"BACKUP": {"Entering BACKUP state", "=> VRRP Instance is no longer owning VRRP VIPs <="},
	"FAULT":  {"Entering FAULT state", "=> VRRP Instance is no longer owning VRRP VIPs <="},
	"STOP":   {"Stopping", "=> VRRP Instance stopping <="},
}

// groupMail are vrrp_sync_smtp_notifier's.
var groupMail = map[string][2]string{
	"MASTER": {"Entering MASTER state", "=> All VRRP group instances are now in MASTER state <="},
	"BACKUP": {"Entering BACKUP state", "=> All VRRP group instances are now in BACKUP state <="},
	"FAULT":  {"Entering FAULT state", "=> All VRRP group instances are now in FAULT state <="},
	"STOP":   {"Stopping", "=> All VRRP group instances are now stopping <="},
}

func upDown(up bool) string {
	if up {
		return "UP"
	}
	return "DOWN"
}

// fmtVS is keepalived's FMT_VS: "[198.18.0.10]:tcp:80", or "FWM 5".
func fmtVS(k ipvsmgr.ServiceKey) string {
	if k.FWMark != 0 {
		return "FWM " + strconv.FormatUint(uint64(k.FWMark), 10)
	}
	return trio(k.Addr, k.Protocol, k.Port)
}

// fmtRS is keepalived's FMT_RS: the server's address and port with its
// service's protocol (a fwmark service's is keepalived's default, tcp).
func fmtRS(r ipvsmgr.ServerRef) string { return trio(r.Server.Addr, r.Service.Protocol, r.Server.Port) }

// trio is keepalived's inet_sockaddrtotrio.
func trio(addr netip.Addr, proto uint16, port uint16) string {
	name := "tcp"
	if proto != 0 {
		name = ipvsmgr.ProtocolName(proto)
	}
	return "[" + addr.String() + "]:" + name + ":" + strconv.Itoa(int(port))
}

// checkBody is a checker's line (check_tcp.c: "=> TCP CHECK failed on
// service <="), with the check's type and what it found.
func checkBody(typ string, up bool, reason string) string {
	switch typ {
	case "exec":
		typ = "MISC " // keepalived's MISC_CHECK
	case "", "none":
		typ = ""
	default:
		typ = strings.ToUpper(typ) + " "
	}
	if up {
		return "=> " + typ + "CHECK succeed on service <="
	}
	if reason != "" {
		return "=> " + typ + "CHECK failed on service : " + reason + " <="
	}
	return "=> " + typ + "CHECK failed on service <="
}

// quorumBody is do_vs_notifies' line: "=> Lost quorum 1+0=1 <= 0 <=", the
// quorum, the hysteresis, the threshold crossed and the healthy servers.
func quorumBody(up, atStart bool, quorum, hysteresis int, healthy string) string {
	what := "Lost quorum"
	switch {
	case up:
		what = "Gained quorum"
	case atStart:
		what = "Starting with quorum down"
	}
	return fmt.Sprintf("=> %s %d+%d=%d <= %s <=", what, quorum, hysteresis, ipvsmgr.QuorumThreshold(!up, quorum, hysteresis), healthy)
}

// mailText is the message as keepalived's body_cmd writes it, with
// X-Mailer ipvsctl: the headers, an empty line, the body and an empty line.
func mailText(s *ipvsmgr.SMTPAlerts, from string, m alertMail, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Date: %s\r\nFrom: %s\r\nSubject: %s\r\nX-Mailer: ipvsctl\r\nTo:", now.Format("Mon, 02 Jan 2006 15:04:05 -0700"), from, m.Subject)
	for i, to := range s.To {
		if i > 0 {
			b.WriteString(",\r\n")
		}
		b.WriteString(" " + to)
	}
	b.WriteString("\r\n\r\n" + m.Body + "\r\n\r\n")
	return b.String()
}

// angle is an address as MAIL FROM and RCPT TO take it.
func angle(addr string) string {
	if i := strings.LastIndexByte(addr, '<'); i >= 0 && strings.HasSuffix(addr, ">") {
		return addr[i:]
	}
	return "<" + addr + ">"
}

// sendMail sends m to the relay with keepalived's exchange (HELO, MAIL
// FROM, RCPT TO for each address, DATA, QUIT), the whole of it bounded by
// connect_timeout.
func sendMail(ctx context.Context, s *ipvsmgr.SMTPAlerts, host string, m alertMail) error {
	timeout := time.Duration(cmp.Or(s.ConnectTimeout, ipvsmgr.DefaultSMTPConnectTimeout)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	relay := relayAddr(s)
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", relay)
	if err != nil {
		return fmt.Errorf("mail relay %s: %w", relay, err)
	}
	defer conn.Close()
	// The deadline bounds every read and write; an end of ctx (the daemon
	// past its stop grace) cuts them short too.
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	defer context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })()
	from := cmp.Or(s.From, "root@"+host)
	if err := smtpExchange(textproto.NewConn(conn), cmp.Or(s.HeloName, host), from, s.To, mailText(s, from, m, time.Now())); err != nil {
		return fmt.Errorf("mail relay %s: %w", relay, err)
	}
	return nil
}

// relayAddr is the mail relay's host:port.
func relayAddr(s *ipvsmgr.SMTPAlerts) string {
	return net.JoinHostPort(s.Server, strconv.Itoa(cmp.Or(s.Port, ipvsmgr.DefaultSMTPPort)))
}

func smtpExchange(c *textproto.Conn, helo, from string, to []string, text string) error {
	step := func(code int, format string, args ...any) error {
		if format != "" {
			if err := c.PrintfLine(format, args...); err != nil {
				return err
			}
		}
		if _, _, err := c.ReadResponse(code); err != nil {
			if format == "" {
				return fmt.Errorf("greeting: %w", err)
			}
			return fmt.Errorf("%s: %w", strings.SplitN(format, " ", 2)[0], err)
		}
		return nil
	}
	if err := step(220, ""); err != nil {
		return err
	}
	if err := step(250, "HELO %s", helo); err != nil {
		return err
	}
	if err := step(250, "MAIL FROM:%s", angle(from)); err != nil {
		return err
	}
	for _, rcpt := range to {
		if err := step(25, "RCPT TO:%s", angle(rcpt)); err != nil { // 250, or 251 forwarded
			return err
		}
	}
	if err := step(354, "DATA"); err != nil {
		return err
	}
	w := c.DotWriter()
	if _, err := w.Write([]byte(text)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if _, _, err := c.ReadResponse(250); err != nil {
		return fmt.Errorf("message: %w", err)
	}
	_ = step(221, "QUIT") // the relay took the message: a QUIT unanswered loses nothing
	return nil
}
