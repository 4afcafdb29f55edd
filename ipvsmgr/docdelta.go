package ipvsmgr

import (
	"errors"
	"slices"
	"strconv"
)

// A director's history is mostly the same document again with a weight
// changed. The store keeps its newest revision whole and each older one as a
// reverse delta against the revision after it: the older document with every
// service the newer one also has, byte for byte, replaced by its index there.
//
//	{"settings":{...},"services":[0,1,{"name":"web",...},3],"imported":[...]}
//
// Documents here are in the stored form (compact, as json.Marshal writes a
// State); UndoDelta(ReverseDelta(old, new), new) gives old back exactly.

var errNotStored = errors.New("not a stored document")

// docParts are a stored document's top-level values, still encoded.
type docParts struct {
	settings, imported []byte   // imported is nil when absent
	services           [][]byte // nil with servicesNull for "services":null
	servicesNull       bool
}

// splitDocument splits a document in the stored form: the keys in that
// order, no white space (so that join gives the same bytes back).
func splitDocument(doc []byte) (p docParts, ok bool) {
	d := &fastDecoder{b: doc}
	ok = d.run(func() {
		next := 0 // the keys come in the order join writes them
		d.object(func(key []byte, _ *uint32) {
			switch {
			case string(key) == "settings" && next == 0:
				p.settings = d.skip()
			case string(key) == "services" && next == 1:
				if p.servicesNull = d.null(); !p.servicesNull {
					p.services = [][]byte{}
					d.array(func() { p.services = append(p.services, d.skip()) })
				}
			case string(key) == "imported" && next == 2:
				p.imported = d.skip()
			default:
				d.fail()
			}
			next++
		})
		if next < 2 || p.joinedLen() != len(doc) {
			d.fail()
		}
	})
	return p, ok
}

// joinedLen is the length of join's result.
func (p *docParts) joinedLen() int {
	n := len(`{"settings":,"services":}`) + len(p.settings)
	if p.servicesNull {
		n += len("null")
	} else {
		n += len("[]") + max(len(p.services)-1, 0)
		for _, s := range p.services {
			n += len(s)
		}
	}
	if p.imported != nil {
		n += len(`,"imported":`) + len(p.imported)
	}
	return n
}

// join writes parts back in the stored form.
func (p *docParts) join() []byte {
	b := make([]byte, 0, p.joinedLen())
	b = append(append(b, `{"settings":`...), p.settings...)
	b = append(b, `,"services":`...)
	if p.servicesNull {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, s := range p.services {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, s...)
		}
		b = append(b, ']')
	}
	if p.imported != nil {
		b = append(append(b, `,"imported":`...), p.imported...)
	}
	return append(b, '}')
}

// ReverseDelta describes old by reference to new.
func ReverseDelta(old, new []byte) ([]byte, error) {
	o, ok1 := splitDocument(old)
	n, ok2 := splitDocument(new)
	if !ok1 || !ok2 {
		return nil, errNotStored
	}
	return reverseDelta(o, matchServices(o.services, n.services)), nil
}

// reverseDelta writes old's parts with each service that match finds in the
// newer document replaced by its index there.
func reverseDelta(old docParts, match []int) []byte {
	old.services = slices.Clone(old.services)
	for i, j := range match {
		if j >= 0 {
			old.services[i] = strconv.AppendInt(nil, int64(j), 10)
		}
	}
	return old.join()
}

// UndoDelta rebuilds the older document from its reverse delta and the
// document after it.
func UndoDelta(delta, new []byte) ([]byte, error) {
	p, ok1 := splitDocument(delta)
	n, ok2 := splitDocument(new)
	if !ok1 || !ok2 {
		return nil, errNotStored
	}
	for i, s := range p.services {
		if len(s) == 0 || s[0] < '0' || s[0] > '9' {
			continue // a service kept whole
		}
		j, err := strconv.Atoi(string(s))
		if err != nil || j < 0 || j >= len(n.services) {
			return nil, errors.New("a reverse delta refers to no service of the next revision")
		}
		p.services[i] = n.services[j]
	}
	return p.join(), nil
}
