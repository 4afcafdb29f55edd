package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
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

// ReverseDelta describes old by reference to new.
func ReverseDelta(old, new []byte) ([]byte, error) {
	o, ok1 := ipvsmgr.SplitStored(old)
	n, ok2 := ipvsmgr.SplitStored(new)
	if !ok1 || !ok2 {
		return nil, errNotStored
	}
	return reverseDelta(o, matchServices(o.Services, n.Services)), nil
}

// reverseDelta writes old's parts with each service that match finds in the
// newer document replaced by its index there.
func reverseDelta(old ipvsmgr.StoredParts, match []int) []byte {
	old.Services = slices.Clone(old.Services)
	for i, j := range match {
		if j >= 0 {
			old.Services[i] = strconv.AppendInt(nil, int64(j), 10)
		}
	}
	return old.Join()
}

// UndoDelta rebuilds the older document from its reverse delta and the
// document after it.
func UndoDelta(delta, new []byte) ([]byte, error) {
	p, ok1 := ipvsmgr.SplitStored(delta)
	n, ok2 := ipvsmgr.SplitStored(new)
	if !ok1 || !ok2 {
		return nil, errNotStored
	}
	for i, s := range p.Services {
		if len(s) == 0 || s[0] < '0' || s[0] > '9' {
			continue // a service kept whole
		}
		j, err := strconv.Atoi(string(s))
		if err != nil || j < 0 || j >= len(n.Services) {
			return nil, errors.New("a reverse delta refers to no service of the next revision")
		}
		p.Services[i] = n.Services[j]
	}
	return p.Join(), nil
}

// StoredState is a stored document (the compact JSON of a State, as the
// store keeps it) with its services still encoded.
type StoredState struct {
	Settings ipvsmgr.Settings
	Imported []ipvsmgr.ImportedKey
	Services [][]byte
	parts    ipvsmgr.StoredParts // the document as stored; none when it is empty or was not in the stored form
}

// ParseStored splits a stored document; nil is the empty state.
func ParseStored(doc []byte) (*StoredState, error) {
	if len(doc) == 0 {
		return &StoredState{}, nil
	}
	if p, ok := ipvsmgr.SplitStored(doc); ok {
		if settings, imported, ok := p.DecodeSettingsAndImported(); ok {
			return &StoredState{Settings: settings, Imported: imported, Services: p.Services, parts: p}, nil
		}
	}
	st, err := ipvsmgr.DecodeState(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("read stored state: %w", err)
	}
	was := &StoredState{Settings: st.Settings, Imported: st.Imported}
	for i := range st.Services {
		was.Services = append(was.Services, ipvsmgr.EncodeService(&st.Services[i]))
	}
	return was, nil
}

// ChangesTo is ipvsmgr.Changes from the stored state to new, whose services
// are also given encoded the same way (newServices[i] for new.Services[i]).
// Only the services whose encoding differs are decoded, so a large state with
// a small change costs little. It also gives the stored document as a reverse
// delta against new (ReverseDelta), for CommitDocument: nil when the stored
// document was empty or not in the stored form.
func (was *StoredState) ChangesTo(newServices [][]byte, new *ipvsmgr.State) (changes []string, prevDelta []byte, err error) {
	if len(newServices) != len(new.Services) {
		return nil, nil, fmt.Errorf("%d encoded services for %d services", len(newServices), len(new.Services))
	}
	match := matchServices(was.Services, newServices)
	matched := make([]bool, len(newServices))
	oldSub := &ipvsmgr.State{Settings: was.Settings, Imported: was.Imported}
	for i, j := range match {
		if j >= 0 {
			matched[j] = true
			continue
		}
		var s ipvsmgr.Service
		if err := json.Unmarshal(was.Services[i], &s); err != nil {
			return nil, nil, fmt.Errorf("read stored state: %w", err)
		}
		oldSub.Services = append(oldSub.Services, s)
	}
	newSub := &ipvsmgr.State{Settings: new.Settings, Imported: new.Imported}
	for j, m := range matched {
		if !m {
			newSub.Services = append(newSub.Services, new.Services[j])
		}
	}
	if was.parts.Settings != nil {
		prevDelta = reverseDelta(was.parts, match)
	}
	return ipvsmgr.Changes(oldSub, newSub), prevDelta, nil
}

// matchServices gives, for each old service, the index of the byte-equal
// service in new, or -1. Most are unchanged and in the same place; the others
// are looked up by their bytes, wherever they are.
func matchServices(old, new [][]byte) []int {
	at := make([]int, len(old))
	var moved map[string]int // new's services not matched in place
	for i, s := range old {
		if i < len(new) && bytes.Equal(s, new[i]) {
			at[i] = i
			continue
		}
		if moved == nil {
			moved = map[string]int{}
			for j, t := range new {
				if j >= len(old) || !bytes.Equal(old[j], t) {
					moved[string(t)] = j
				}
			}
		}
		j, ok := moved[string(s)]
		if !ok {
			j = -1
		}
		at[i] = j
	}
	return at
}
