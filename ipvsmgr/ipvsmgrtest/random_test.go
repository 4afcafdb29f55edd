package ipvsmgrtest

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// Every field of a service, its servers, matches and checks (by the path
// of its Go field names) is set to a non-zero value in some sample.
func TestRandomStateSetsEveryField(t *testing.T) {
	want := map[string]bool{}
	var paths func(typ reflect.Type, at string)
	paths = func(typ reflect.Type, at string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct {
			return
		}
		for i := range typ.NumField() {
			if f := typ.Field(i); f.IsExported() {
				want[at+"."+f.Name] = true
				paths(f.Type, at+"."+f.Name)
			}
		}
	}
	paths(reflect.TypeFor[ipvsmgr.Service](), "Service")
	seen := map[string]bool{}
	var walk func(v reflect.Value, at string)
	walk = func(v reflect.Value, at string) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem(), at)
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i), at)
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if f := v.Type().Field(i); f.IsExported() {
					if !v.Field(i).IsZero() {
						seen[at+"."+f.Name] = true
					}
					walk(v.Field(i), at+"."+f.Name)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range RandomState(r, 300).Services {
		walk(reflect.ValueOf(s), "Service")
	}
	for p := range want {
		if !seen[p] {
			t.Errorf("RandomState never sets %s", p)
		}
	}
	if len(want) < 60 {
		t.Errorf("only %d fields found: the walk of the model is broken", len(want))
	}
	t.Logf("%d fields, each set in some of 300 services", len(want))
}
