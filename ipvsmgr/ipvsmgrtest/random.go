// Package ipvsmgrtest makes documents for tests of ipvsmgr and of the
// packages that store or compare them, and real servers for tests of checks.
package ipvsmgrtest

import (
	"math/rand/v2"
	"reflect"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// RandomState gives a state of that many services, each field of every
// service, server, match and check set by reflection (so a field added to
// the model is covered without a change here; TestRandomStateSetsEveryField
// proves each is set in some sample), with strings json.Marshal escapes
// and numbers at their edges.
func RandomState(r *rand.Rand, services int) *ipvsmgr.State {
	st := &ipvsmgr.State{Services: []ipvsmgr.Service{}}
	for range services {
		var s ipvsmgr.Service
		fill(r, reflect.ValueOf(&s).Elem(), 0)
		st.Services = append(st.Services, s)
	}
	return st
}

var (
	words  = []string{"", "web", "dr", "wlc", "198.18.0.11", "2001:db8::1", "a<b>&c", `q"u\o`, "tab\there", "é", "\u2028", "\x7f", "%h:%p"}
	ints   = []int64{0, 1, -1, 80, 65535, 1 << 40}
	uints  = []uint64{0, 1, 80, 65535, 1<<32 - 1}
	floats = []float64{0, 0.1, 1, 2.5, 1e-7, 1e21, 123456789.125, -3}
)

// fill sets v, of any kind the model uses, at random: a pointer nil or
// filled, a list nil, empty or of up to three, each struct field in turn.
func fill(r *rand.Rand, v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(words[r.IntN(len(words))])
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x := ints[r.IntN(len(ints))]
		for v.OverflowInt(x) {
			x = ints[r.IntN(4)]
		}
		v.SetInt(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		x := uints[r.IntN(len(uints))]
		for v.OverflowUint(x) {
			x = uints[r.IntN(3)]
		}
		v.SetUint(x)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(floats[r.IntN(len(floats))])
	case reflect.Pointer:
		if r.IntN(3) > 0 {
			v.Set(reflect.New(v.Type().Elem()))
			fill(r, v.Elem(), depth+1)
		}
	case reflect.Slice:
		switch k := r.IntN(4); {
		case k == 0:
		case k == 1 || depth > 2:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			v.Set(reflect.MakeSlice(v.Type(), k-1, k-1))
			for i := range v.Len() {
				fill(r, v.Index(i), depth+1)
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(r, v.Field(i), depth+1)
			}
		}
	default:
		panic("ipvsmgrtest: RandomState cannot fill a " + v.Type().String())
	}
}
