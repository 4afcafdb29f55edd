package metrics

import (
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// The exposition is written here in Prometheus' text format 0.0.4, as
// client_golang's encoder writes it (label names in order, `le` and
// `quantile` last, floats as strconv's shortest 'g'), without its
// registry: client_golang's package init alone cost every start of the
// binary, CLI verbs included, about 2 ms natively (its default registry's
// Go and process collectors, procfs, protobuf's descriptors of its model),
// and its Gather built a protobuf message per series, 90,000 of them on a
// director of 11,000 real servers, where this appends text.

// contentType is the text format's media type.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// expo is one exposition being written: its families by name.
type expo struct {
	fams map[string]*family
	// sizes are each family's bytes in the last exposition: its buffer
	// starts that large, where growing it by doubling cost a director of
	// 11,000 real servers half of a rendering's time.
	sizes map[string]int
}

// family is one metric family: its samples are appended to b as they come,
// so the samples of a family stay together whatever order they are written in.
type family struct {
	name, typ, help string
	labels          []string // as the caller passes values
	order           []int    // the labels' indexes in name order
	b               []byte
}

// newExpo starts an exposition; sizes are the last one's (nil for none).
func newExpo(sizes map[string]int) *expo {
	if sizes == nil {
		sizes = map[string]int{}
	}
	return &expo{fams: map[string]*family{}, sizes: sizes}
}

// familySizes are the sizes its families' buffers are to start with in
// the next exposition: an eighth more than in this one.
func (e *expo) familySizes() map[string]int {
	m := make(map[string]int, len(e.fams))
	for name, f := range e.fams {
		m[name] = len(f.b) + len(f.b)/8
	}
	return m
}

// family is the family name, made on first use with its type (counter,
// gauge, histogram, summary), help and label names.
func (e *expo) family(name, typ, help string, labels ...string) *family {
	if f := e.fams[name]; f != nil {
		return f
	}
	f := &family{name: name, typ: typ, help: help, labels: labels, order: make([]int, len(labels)), b: make([]byte, 0, e.sizes[name])}
	for i := range f.order {
		f.order[i] = i
	}
	sort.Slice(f.order, func(a, b int) bool { return labels[f.order[a]] < labels[f.order[b]] })
	e.fams[name] = f
	return f
}

// bytes is the exposition: the families with samples, by name.
func (e *expo) bytes() []byte {
	n := 0
	for _, f := range e.fams {
		n += len(f.b) + len(f.help) + 2*len(f.name) + 32
	}
	out := make([]byte, 0, n)
	for _, name := range slices.Sorted(maps.Keys(e.fams)) {
		f := e.fams[name]
		if len(f.b) == 0 {
			continue
		}
		out = append(out, "# HELP "...)
		out = append(out, name...)
		out = append(out, ' ')
		out = appendEscaped(out, f.help, false)
		out = append(out, "\n# TYPE "...)
		out = append(out, name...)
		out = append(out, ' ')
		out = append(out, f.typ...)
		out = append(out, '\n')
		out = append(out, f.b...)
	}
	return out
}

// add writes one sample of the family, values in the order of its labels.
func (f *family) add(v float64, values ...string) { f.sample("", "", "", v, values) }

// sample writes the series name+suffix with the family's labels and, if
// extra is set, one more label written last (le, quantile).
func (f *family) sample(suffix, extra, extraValue string, v float64, values []string) {
	b := append(f.b, f.name...)
	b = append(b, suffix...)
	if len(values) > 0 || extra != "" {
		b = append(b, '{')
		for n, i := range f.order {
			if n > 0 {
				b = append(b, ',')
			}
			b = appendLabel(b, f.labels[i], values[i])
		}
		if extra != "" {
			if len(values) > 0 {
				b = append(b, ',')
			}
			b = appendLabel(b, extra, extraValue)
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = appendFloat(b, v)
	f.b = append(b, '\n')
}

// histogram writes a histogram's series: counts are the cumulative counts
// of the samples at most each bound, count all of them.
func (f *family) histogram(bounds []float64, counts []uint64, sum float64, count uint64, values ...string) {
	for i, le := range bounds {
		f.sample("_bucket", "le", string(appendFloat(nil, le)), float64(counts[i]), values)
	}
	f.sample("_bucket", "le", "+Inf", float64(count), values)
	f.sample("_sum", "", "", sum, values)
	f.sample("_count", "", "", float64(count), values)
}

func appendLabel(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, '=', '"')
	b = appendEscaped(b, value, true)
	return append(b, '"')
}

// appendEscaped escapes a backslash and a line feed, and in a label value
// a double quote, as the text format requires.
func appendEscaped(b []byte, s string, quote bool) []byte {
	if !strings.ContainsAny(s, "\\\n\"") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '"' && quote:
			b = append(b, '\\', '"')
		default:
			b = append(b, c)
		}
	}
	return b
}

func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, +1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// vec is a counter, gauge or histogram the daemon updates as things
// happen, one cell per set of label values.
type vec struct {
	name, typ, help string
	labels          []string
	bounds          []float64 // a histogram's bucket bounds
	mu              sync.Mutex
	cells           map[string]*cell
}

type cell struct {
	values []string
	v      float64  // a counter's or gauge's value; a histogram's sum
	counts []uint64 // a histogram's samples in each bucket (not cumulative)
	n      uint64   // a histogram's samples
}

func newVec(typ, name, help string, labels ...string) *vec {
	v := &vec{name: name, typ: typ, help: help, labels: labels, cells: map[string]*cell{}}
	if len(labels) == 0 {
		v.cell(nil) // a series without labels is there from the start, at 0
	}
	return v
}

func newHistogram(name, help string, bounds []float64, labels ...string) *vec {
	v := &vec{name: name, typ: "histogram", help: help, labels: labels, bounds: bounds, cells: map[string]*cell{}}
	if len(labels) == 0 {
		v.cell(nil)
	}
	return v
}

// cell is the cell of values, made on first use (v.mu held). A cell
// found is found without an allocation: a check's result observes one.
func (v *vec) cell(values []string) *cell {
	var buf [128]byte
	key := buf[:0]
	for _, s := range values {
		key = append(append(key, s...), 0xff)
	}
	if c := v.cells[string(key)]; c != nil {
		return c
	}
	c := &cell{values: slices.Clone(values)}
	if v.bounds != nil {
		c.counts = make([]uint64, len(v.bounds))
	}
	v.cells[string(key)] = c
	return c
}

func (v *vec) add(d float64, values ...string) {
	v.mu.Lock()
	v.cell(values).v += d
	v.mu.Unlock()
}

func (v *vec) set(x float64, values ...string) {
	v.mu.Lock()
	v.cell(values).v = x
	v.mu.Unlock()
}

// observe counts one sample x of a histogram.
func (v *vec) observe(x float64, values ...string) {
	v.mu.Lock()
	c := v.cell(values)
	if i := sort.SearchFloat64s(v.bounds, x); i < len(v.bounds) {
		c.counts[i]++
	}
	c.v += x
	c.n++
	v.mu.Unlock()
}

func (v *vec) write(e *expo) {
	f := e.family(v.name, v.typ, v.help, v.labels...)
	v.mu.Lock()
	defer v.mu.Unlock()
	// In the order of the values by label name, as client_golang had them.
	cells := slices.SortedFunc(maps.Values(v.cells), func(a, b *cell) int {
		for _, i := range f.order {
			if c := strings.Compare(a.values[i], b.values[i]); c != 0 {
				return c
			}
		}
		return 0
	})
	for _, c := range cells {
		if v.bounds == nil {
			f.add(c.v, c.values...)
			continue
		}
		cum := make([]uint64, len(c.counts))
		var run uint64
		for i, n := range c.counts {
			run += n
			cum[i] = run
		}
		f.histogram(v.bounds, cum, c.v, c.n, c.values...)
	}
}

// exponentialBuckets are count bounds from start, each factor times the last.
func exponentialBuckets(start, factor float64, count int) []float64 {
	b := make([]float64, count)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

// defaultBuckets are client_golang's DefBuckets, the request histogram's.
var defaultBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
