package daemon

import "sync"

// serialQueue runs the jobs of each key one at a time and in order, in a
// goroutine that lives while the key has jobs waiting, so a slow key (a
// hung notify program, a webhook that times out) holds up only its own. At
// most max jobs wait per key: past that the oldest waiting is dropped, and
// dropped is told of it. The notify programs (by subject) and the alerts
// (by destination) use it.
type serialQueue[T any] struct {
	max     int
	run     func(key string, job T)
	dropped func(key string, job T)
	mu      sync.Mutex
	queued  map[string][]T
	wg      sync.WaitGroup
}

func newSerialQueue[T any](max int, run, dropped func(key string, job T)) *serialQueue[T] {
	return &serialQueue[T]{max: max, run: run, dropped: dropped, queued: map[string][]T{}}
}

// add queues job behind key's, and starts key's runner if none runs.
func (q *serialQueue[T]) add(key string, job T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	waiting, running := q.queued[key]
	if len(waiting) >= q.max {
		q.dropped(key, waiting[0])
		waiting = waiting[1:]
	}
	q.queued[key] = append(waiting, job)
	if running {
		return
	}
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		for {
			q.mu.Lock()
			waiting := q.queued[key]
			if len(waiting) == 0 {
				delete(q.queued, key)
				q.mu.Unlock()
				return
			}
			next := waiting[0]
			q.queued[key] = waiting[1:]
			q.mu.Unlock()
			q.run(key, next)
		}
	}()
}

// waiting is how many of key's jobs wait (the one running not counted).
func (q *serialQueue[T]) waiting(key string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued[key])
}

// wait returns once every job queued has run (or been dropped).
func (q *serialQueue[T]) wait() { q.wg.Wait() }
