package metrics

import (
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	runtimemetrics "runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The go_* and process_* families, with the names, types and help of
// client_golang's Go and process collectors, so that dashboards and
// alerts written for any Go exporter keep working.

// goFamilies writes the Go runtime's families.
func goFamilies(e *expo) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gauge := func(name, help string, v float64) { e.family(name, "gauge", help).add(v) }
	counter := func(name, help string, v float64) { e.family(name, "counter", help).add(v) }

	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)
	f := e.family("go_gc_duration_seconds", "summary", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.")
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		f.sample("", "quantile", q, gc.PauseQuantiles[i].Seconds(), nil)
	}
	f.sample("_sum", "", "", gc.PauseTotal.Seconds(), nil)
	f.sample("_count", "", "", float64(gc.NumGC), nil)

	rm := []runtimemetrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	runtimemetrics.Read(rm)
	value := func(s runtimemetrics.Sample) float64 {
		if s.Value.Kind() == runtimemetrics.KindUint64 {
			return float64(s.Value.Uint64())
		}
		return 0
	}
	gauge("go_gc_gogc_percent", "Heap size target percentage configured by the user, otherwise 100. This value is set by the GOGC environment variable, and the runtime/debug.SetGCPercent function. Sourced from /gc/gogc:percent.", value(rm[0]))
	gauge("go_gc_gomemlimit_bytes", "Go runtime memory limit configured by the user, otherwise math.MaxInt64. This value is set by the GOMEMLIMIT environment variable, and the runtime/debug.SetMemoryLimit function. Sourced from /gc/gomemlimit:bytes.", value(rm[1]))
	gauge("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
	e.family("go_info", "gauge", "Information about the Go environment.", "version").add(1, runtime.Version())
	threads, _ := runtime.ThreadCreateProfile(nil)
	gauge("go_threads", "Number of OS threads created.", float64(threads))
	gauge("go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting, or the number of operating system threads that can execute user-level Go code simultaneously. Sourced from /sched/gomaxprocs:threads.", float64(runtime.GOMAXPROCS(0)))

	for _, m := range []struct {
		name, help string
		v          uint64
		counter    bool
	}{
		{"alloc_bytes", "Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.", ms.Alloc, false},
		{"alloc_bytes_total", "Total number of bytes allocated in heap until now, even if released already. Equals to /gc/heap/allocs:bytes.", ms.TotalAlloc, true},
		{"buck_hash_sys_bytes", "Number of bytes used by the profiling bucket hash table. Equals to /memory/classes/profiling/buckets:bytes.", ms.BuckHashSys, false},
		{"frees_total", "Total number of heap objects frees. Equals to /gc/heap/frees:objects + /gc/heap/tiny/allocs:objects.", ms.Frees, true},
		{"gc_sys_bytes", "Number of bytes used for garbage collection system metadata. Equals to /memory/classes/metadata/other:bytes.", ms.GCSys, false},
		{"heap_alloc_bytes", "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes. Equals to /memory/classes/heap/objects:bytes.", ms.HeapAlloc, false},
		{"heap_idle_bytes", "Number of heap bytes waiting to be used. Equals to /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", ms.HeapIdle, false},
		{"heap_inuse_bytes", "Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes", ms.HeapInuse, false},
		{"heap_objects", "Number of currently allocated objects. Equals to /gc/heap/objects:objects.", ms.HeapObjects, false},
		{"heap_released_bytes", "Number of heap bytes released to OS. Equals to /memory/classes/heap/released:bytes.", ms.HeapReleased, false},
		{"heap_sys_bytes", "Number of heap bytes obtained from system. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes + /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", ms.HeapSys, false},
		{"mallocs_total", "Total number of heap objects allocated, both live and gc-ed. Semantically a counter version for go_memstats_heap_objects gauge. Equals to /gc/heap/allocs:objects + /gc/heap/tiny/allocs:objects.", ms.Mallocs, true},
		{"mcache_inuse_bytes", "Number of bytes in use by mcache structures. Equals to /memory/classes/metadata/mcache/inuse:bytes.", ms.MCacheInuse, false},
		{"mcache_sys_bytes", "Number of bytes used for mcache structures obtained from system. Equals to /memory/classes/metadata/mcache/inuse:bytes + /memory/classes/metadata/mcache/free:bytes.", ms.MCacheSys, false},
		{"mspan_inuse_bytes", "Number of bytes in use by mspan structures. Equals to /memory/classes/metadata/mspan/inuse:bytes.", ms.MSpanInuse, false},
		{"mspan_sys_bytes", "Number of bytes used for mspan structures obtained from system. Equals to /memory/classes/metadata/mspan/inuse:bytes + /memory/classes/metadata/mspan/free:bytes.", ms.MSpanSys, false},
		{"next_gc_bytes", "Number of heap bytes when next garbage collection will take place. Equals to /gc/heap/goal:bytes.", ms.NextGC, false},
		{"other_sys_bytes", "Number of bytes used for other system allocations. Equals to /memory/classes/other:bytes.", ms.OtherSys, false},
		{"stack_inuse_bytes", "Number of bytes obtained from system for stack allocator in non-CGO environments. Equals to /memory/classes/heap/stacks:bytes.", ms.StackInuse, false},
		{"stack_sys_bytes", "Number of bytes obtained from system for stack allocator. Equals to /memory/classes/heap/stacks:bytes + /memory/classes/os-stacks:bytes.", ms.StackSys, false},
		{"sys_bytes", "Number of bytes obtained from system. Equals to /memory/classes/total:byte.", ms.Sys, false},
	} {
		if m.counter {
			counter("go_memstats_"+m.name, m.help, float64(m.v))
		} else {
			gauge("go_memstats_"+m.name, m.help, float64(m.v))
		}
	}
	gauge("go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", float64(ms.LastGC)/1e9)
}

// userHZ is the unit of /proc/PID/stat's times (USER_HZ, 100 on every
// Linux architecture Go runs on).
const userHZ = 100

// processFamilies writes the process's families from /proc/self; a file
// that cannot be read leaves its families out.
func processFamilies(e *expo) {
	gauge := func(name, help string, v float64) { e.family(name, "gauge", help).add(v) }
	if stat, err := os.ReadFile("/proc/self/stat"); err == nil {
		// The fields after the command's closing parenthesis, from state (3).
		if i := bytes.LastIndexByte(stat, ')'); i > 0 {
			f := strings.Fields(string(stat[i+1:]))
			field := func(n int) float64 { v, _ := strconv.ParseFloat(f[n-3], 64); return v }
			if len(f) >= 22 {
				e.family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.").add((field(14) + field(15)) / userHZ)
				gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", field(23))
				gauge("process_resident_memory_bytes", "Resident memory size in bytes.", field(24)*float64(os.Getpagesize()))
				if boot := bootTime(); boot > 0 {
					gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", boot+field(22)/userHZ)
				}
			}
		}
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		gauge("process_open_fds", "Number of open file descriptors.", float64(len(fds)))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		gauge("process_max_fds", "Maximum number of open file descriptors.", float64(lim.Cur))
	}
	if syscall.Getrlimit(syscall.RLIMIT_AS, &lim) == nil {
		gauge("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", float64(lim.Cur))
	}
	if in, out, ok := ipOctets(); ok {
		e.family("process_network_receive_bytes_total", "counter", "Number of bytes received by the process over the network.").add(in)
		e.family("process_network_transmit_bytes_total", "counter", "Number of bytes sent by the process over the network.").add(out)
	}
}

// bootTime is the system's boot time (Unix seconds), /proc/stat's btime.
func bootTime() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			t, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return t
		}
	}
	return 0
}

// ipOctets are the IpExt InOctets and OutOctets of the process's network
// namespace (/proc/self/net/netstat), what client_golang reports as the
// process's network bytes.
func ipOctets() (in, out float64, ok bool) {
	b, err := os.ReadFile("/proc/self/net/netstat")
	if err != nil {
		return 0, 0, false
	}
	var names []string
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "IpExt:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i := 1; i < len(f) && i < len(names); i++ {
			v, _ := strconv.ParseFloat(f[i], 64)
			switch names[i] {
			case "InOctets":
				in, ok = v, true
			case "OutOctets":
				out = v
			}
		}
	}
	return in, out, ok
}
