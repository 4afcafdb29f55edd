package health

import (
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

var qtypeNumbers = map[string]dnsmessage.Type{
	"A": dnsmessage.TypeA, "AAAA": dnsmessage.TypeAAAA, "CNAME": dnsmessage.TypeCNAME, "MX": dnsmessage.TypeMX,
	"NS": dnsmessage.TypeNS, "PTR": dnsmessage.TypePTR, "SOA": dnsmessage.TypeSOA, "SRV": dnsmessage.TypeSRV,
	"TXT": dnsmessage.TypeTXT, "ANY": dnsmessage.TypeALL,
}

// rcodeName names a response code as the document does.
func rcodeName(r dnsmessage.RCode) string {
	switch r {
	case dnsmessage.RCodeSuccess:
		return "NOERROR"
	case dnsmessage.RCodeFormatError:
		return "FORMERR"
	case dnsmessage.RCodeServerFailure:
		return "SERVFAIL"
	case dnsmessage.RCodeNameError:
		return "NXDOMAIN"
	case dnsmessage.RCodeNotImplemented:
		return "NOTIMP"
	case dnsmessage.RCodeRefused:
		return "REFUSED"
	}
	return "RCODE" + strconv.Itoa(int(r))
}

// checkDNS asks the real server for name/qtype: it passes on an answer of
// that type, or, when rcode is set, on that response code.
func checkDNS(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	name := spec.Name
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	qname, err := dnsmessage.NewName(name)
	if err != nil {
		return fault("bad query name " + strconv.Quote(spec.Name))
	}
	qtype := qtypeNumbers[spec.QType]
	id := uint16(rand.Uint32())
	msg := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: id, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: qname, Type: qtype, Class: dnsmessage.ClassINET}},
	}
	query, err := msg.Pack()
	if err != nil {
		return fault("pack DNS query: " + err.Error())
	}
	conn, err := dial(ctx, spec.Protocol, spec.Target.String())
	if err != nil {
		return describe(ctx, spec, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	exchange := exchangeDNSUDP
	if spec.Protocol == "tcp" {
		exchange = exchangeDNSTCP
	}
	reply, err := exchange(conn, query, id)
	if err != nil {
		return describe(ctx, spec, err)
	}
	return judgeDNSReply(spec, qtype, id, reply)
}

// exchangeDNSTCP sends the query and reads the reply, each framed by its
// length as DNS over TCP has them.
func exchangeDNSTCP(conn net.Conn, query []byte, _ uint16) ([]byte, error) {
	framed := binary.BigEndian.AppendUint16(nil, uint16(len(query)))
	if _, err := conn.Write(append(framed, query...)); err != nil {
		return nil, err
	}
	var size [2]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, err
	}
	reply := make([]byte, binary.BigEndian.Uint16(size[:]))
	if _, err := io.ReadFull(conn, reply); err != nil {
		return nil, err
	}
	return reply, nil
}

// exchangeDNSUDP sends the query and reads datagrams until one carries its id.
func exchangeDNSUDP(conn net.Conn, query []byte, id uint16) ([]byte, error) {
	if _, err := conn.Write(query); err != nil {
		return nil, err
	}
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return nil, err
		}
		if n >= 2 && binary.BigEndian.Uint16(buf) == id {
			return buf[:n], nil
		}
		// Not our reply (a late answer to an earlier query): wait on.
	}
}

// judgeDNSReply passes a reply to query id with the response code the check
// wants, or else with at least one answer of qtype.
func judgeDNSReply(spec *ipvsmgr.CheckSpec, qtype dnsmessage.Type, id uint16, reply []byte) Result {
	var p dnsmessage.Parser
	h, err := p.Start(reply)
	if err != nil {
		return fail("DNS: malformed reply")
	}
	if h.ID != id || !h.Response {
		return fail("DNS: not a reply to the query")
	}
	rcode := rcodeName(h.RCode)
	if spec.RCode != "" {
		if rcode != spec.RCode {
			return fail("DNS " + rcode)
		}
		return pass("DNS " + rcode)
	}
	if h.RCode != dnsmessage.RCodeSuccess {
		return fail("DNS " + rcode)
	}
	if err := p.SkipAllQuestions(); err != nil {
		return fail("DNS: malformed reply")
	}
	answers := 0
	for {
		ah, err := p.AnswerHeader()
		if err == dnsmessage.ErrSectionDone {
			break
		}
		if err != nil {
			return fail("DNS: malformed reply")
		}
		if ah.Type == qtype || qtype == dnsmessage.TypeALL {
			answers++
		}
		if err := p.SkipAnswer(); err != nil {
			return fail("DNS: malformed reply")
		}
	}
	if answers == 0 {
		return fail("DNS: no " + spec.QType + " answer")
	}
	return pass("DNS NOERROR, " + strconv.Itoa(answers) + " answer(s)")
}
