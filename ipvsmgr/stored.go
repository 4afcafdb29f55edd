package ipvsmgr

// The store keeps documents in the stored form: compact, as json.Marshal
// writes a State, the keys settings, services, imported in that order. It
// compares and rewrites them value by value (its revisions are reverse deltas
// against the next one) without decoding the services: StoredParts are those
// values, still encoded, and Join writes the same bytes back.

// StoredParts are a stored document's top-level values, still encoded; each
// is a slice of the document split.
type StoredParts struct {
	Settings, Imported []byte   // Imported is nil when absent
	Services           [][]byte // nil with ServicesNull for "services":null
	ServicesNull       bool
}

// SplitStored splits a document in the stored form; ok is false for any
// other (white space, keys in another order), for which Join would not give
// the same bytes back.
func SplitStored(doc []byte) (p StoredParts, ok bool) {
	d := &fastDecoder{b: doc}
	ok = d.run(func() {
		next := 0 // the keys come in the order Join writes them
		d.object(func(key []byte, _ *uint32) {
			switch {
			case string(key) == "settings" && next == 0:
				p.Settings = d.skip()
			case string(key) == "services" && next == 1:
				if p.ServicesNull = d.null(); !p.ServicesNull {
					p.Services = [][]byte{}
					d.array(func() { p.Services = append(p.Services, d.skip()) })
				}
			case string(key) == "imported" && next == 2:
				p.Imported = d.skip()
			default:
				d.fail()
			}
			next++
		})
		if next < 2 || p.Len() != len(doc) {
			d.fail()
		}
	})
	return p, ok
}

// Len is the length of Join's result.
func (p *StoredParts) Len() int {
	n := len(`{"settings":,"services":}`) + len(p.Settings)
	if p.ServicesNull {
		n += len("null")
	} else {
		n += len("[]") + max(len(p.Services)-1, 0)
		for _, s := range p.Services {
			n += len(s)
		}
	}
	if p.Imported != nil {
		n += len(`,"imported":`) + len(p.Imported)
	}
	return n
}

// Join writes the parts back in the stored form.
func (p *StoredParts) Join() []byte {
	b := make([]byte, 0, p.Len())
	b = append(append(b, `{"settings":`...), p.Settings...)
	b = append(b, `,"services":`...)
	if p.ServicesNull {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, s := range p.Services {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, s...)
		}
		b = append(b, ']')
	}
	if p.Imported != nil {
		b = append(append(b, `,"imported":`...), p.Imported...)
	}
	return append(b, '}')
}

// DecodeSettingsAndImported decodes the two small values as DecodeState
// does, unknown fields refused; ok is false when DecodeState would not take
// them as they are.
func (p *StoredParts) DecodeSettingsAndImported() (settings Settings, imported []ImportedKey, ok bool) {
	ok = decodeStrict(p.Settings, &settings) && (p.Imported == nil || decodeStrict(p.Imported, &imported))
	ScrubImported(imported)
	return settings, imported, ok
}
