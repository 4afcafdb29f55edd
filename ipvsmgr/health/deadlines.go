package health

import "time"

// due is where a check under way sits in its deadline heap.
type due struct {
	deadline time.Time
	index    int
}

func (d *due) at() *due { return d }

// deadlines is a container/heap of checks under way, the soonest deadline
// first: the connector's connects and the prober's SYNs.
type deadlines[T interface{ at() *due }] []T

func (h deadlines[T]) Len() int           { return len(h) }
func (h deadlines[T]) Less(i, j int) bool { return h[i].at().deadline.Before(h[j].at().deadline) }
func (h deadlines[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at().index, h[j].at().index = i, j
}
func (h *deadlines[T]) Push(x any) {
	v := x.(T)
	v.at().index = len(*h)
	*h = append(*h, v)
}
func (h *deadlines[T]) Pop() any {
	old := *h
	var zero T
	v := old[len(old)-1]
	old[len(old)-1] = zero
	*h = old[:len(old)-1]
	return v
}

// soonest is the earliest deadline (zero: none).
func (h *deadlines[T]) soonest() time.Time {
	if len(*h) == 0 {
		return time.Time{}
	}
	return (*h)[0].at().deadline
}
