// Package tune checks a director's kernel settings against what its desired
// state and its measured load call for, and writes the recommended ones
// persistently (sysctl.d, modprobe.d) with a saved copy to undo them.
//
// The rules are pure: a Reading of the host, the desired state and a Load go
// in, Findings come out. Reading and writing the host goes through Host, a
// directory tree: "/" on a director, a temporary tree in tests.
package tune

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Host is the part of the file system tune reads and writes.
type Host interface {
	ReadFile(path string) ([]byte, error)
	Glob(pattern string) ([]string, error)
	WriteFile(path string, data []byte, perm fs.FileMode) error
	Remove(path string) error
}

// DirHost is a Host rooted at Root ("/" on a director).
type DirHost struct{ Root string }

func (h DirHost) path(p string) string { return filepath.Join(h.Root, p) }

// ReadFile reads p under the root.
func (h DirHost) ReadFile(p string) ([]byte, error) { return os.ReadFile(h.path(p)) }

// Glob matches pattern under the root and returns paths without it.
func (h DirHost) Glob(pattern string) ([]string, error) {
	m, err := filepath.Glob(h.path(pattern))
	if err != nil {
		return nil, err
	}
	root := filepath.Clean(h.Root)
	for i := range m {
		rel, err := filepath.Rel(root, m[i])
		if err != nil {
			return nil, err
		}
		m[i] = "/" + rel
	}
	return m, nil
}

// WriteFile writes p under the root, making its directory.
func (h DirHost) WriteFile(p string, data []byte, perm fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(h.path(p)), 0o755); err != nil {
		return err
	}
	return os.WriteFile(h.path(p), data, perm)
}

// Remove removes p under the root.
func (h DirHost) Remove(p string) error { return os.Remove(h.path(p)) }

// SysctlPath is the /proc/sys file of a dotted sysctl name.
func SysctlPath(name string) string {
	return "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
}

// Reading is what tune read of the host.
type Reading struct {
	// IPVS: whether ip_vs is loaded (its /proc files exist).
	IPVS bool `json:"ipvs"`
	// ConnTabBits is ip_vs's conn_tab_bits module parameter (0: unknown).
	ConnTabBits int `json:"conn_tab_bits"`
	// ModprobeBits is the conn_tab_bits an /etc/modprobe.d file sets for
	// the next load of ip_vs (0: none does).
	ModprobeBits int `json:"modprobe_conn_tab_bits,omitempty"`
	// Sysctls holds each sysctl tune looks at that exists, by dotted name.
	Sysctls map[string]string `json:"sysctls"`
	// Conns is the number of entries in the IPVS connection table now.
	Conns int `json:"conns"`
	// ConnRate is IPVS's own estimate of new connections a second.
	ConnRate float64 `json:"conn_rate"`
	// CPUs online.
	CPUs int `json:"cpus"`
	// MemTotalKB from /proc/meminfo; PageSize in bytes.
	MemTotalKB int64 `json:"mem_total_kb"`
	// MHTableSize is the kernel's mh lookup table size (a prime);
	// MHTableFrom says where it came from.
	MHTableSize int    `json:"mh_table_size"`
	MHTableFrom string `json:"mh_table_from"`
	// NICs are the network devices with a device behind them (not lo,
	// veth, bridges).
	NICs []NIC `json:"nics"`
	// FTPHelper: ip_vs_ftp is loaded (it keeps conntrack entries anyway).
	FTPHelper bool `json:"ftp_helper"`
}

// NIC is one network device's receive queues and interrupts.
type NIC struct {
	Name     string  `json:"name"`
	RxQueues []Queue `json:"rx_queues"`
	// IRQCPUs holds, per interrupt of the device, the CPUs it may run on
	// (smp_affinity_list).
	IRQCPUs []string `json:"irq_cpus"`
}

// Queue is one receive queue: its RPS CPU mask and RFS flow count.
type Queue struct {
	Name       string `json:"name"`
	RPSCPUs    string `json:"rps_cpus"`
	RPSFlowCnt int    `json:"rps_flow_cnt"`
}

// Sysctls tune reads (those of them the kernel has).
var watched = []string{
	"net.ipv4.vs.conn_reuse_mode", "net.ipv4.vs.expire_nodest_conn", "net.ipv4.vs.expire_quiescent_template",
	"net.ipv4.vs.schedule_icmp", "net.ipv4.vs.amemthresh", "net.ipv4.vs.drop_entry", "net.ipv4.vs.conntrack",
	"net.ipv4.vs.sloppy_tcp", "net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding",
	"net.ipv4.conf.all.rp_filter", "net.ipv4.conf.default.rp_filter", "net.core.rps_sock_flow_entries",
}

// mhPrimes are the mh table sizes by CONFIG_IP_VS_MH_TAB_INDEX 8..17
// (net/netfilter/ipvs/Kconfig).
var mhPrimes = []int{251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65521, 131071}

// Read reads the host. Files that do not exist are left out of the
// reading; any other error is returned.
func Read(h Host) (*Reading, error) { return read(h, true) }

// ReadSettings reads the host but not the connection table and its rate
// (a director with a million entries has a /proc/net/ip_vs_conn of 130 MB):
// for a caller that has the load from the kernel's counters already.
func ReadSettings(h Host) (*Reading, error) { return read(h, false) }

// read takes a Reading of h; withLoad counts the connection table and reads its rate too.
func read(h Host, withLoad bool) (*Reading, error) {
	r := &Reading{Sysctls: map[string]string{}}
	get := func(p string) (string, bool, error) {
		b, err := h.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return "", false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("read %s: %w", p, err)
		}
		return strings.TrimSpace(string(b)), true, nil
	}
	for _, name := range watched {
		v, ok, err := get(SysctlPath(name))
		if err != nil {
			return nil, err
		}
		if ok {
			r.Sysctls[name] = strings.Join(strings.Fields(v), " ")
		}
	}
	if v, ok, err := get("/sys/module/ip_vs/parameters/conn_tab_bits"); err != nil {
		return nil, err
	} else if ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("read ip_vs conn_tab_bits: %q is not a number", v)
		}
		r.ConnTabBits = n
	}
	if err := r.readModprobe(h); err != nil {
		return nil, err
	}
	if err := r.readLoad(h, get, withLoad); err != nil {
		return nil, err
	}
	if err := r.readMachine(get); err != nil {
		return nil, err
	}
	if err := r.readMH(h, get); err != nil {
		return nil, err
	}
	if err := r.readNICs(h, get); err != nil {
		return nil, err
	}
	return r, nil
}

// readLoad reads whether IPVS is loaded and, withLoad, the connections in
// its table and their rate.
func (r *Reading) readLoad(h Host, get func(string) (string, bool, error), withLoad bool) error {
	if !withLoad {
		_, ok, err := get("/proc/net/ip_vs")
		if err != nil {
			return err
		}
		r.IPVS = ok
	} else if b, err := h.ReadFile("/proc/net/ip_vs_conn"); err == nil {
		r.IPVS = true
		r.Conns = max(bytes.Count(b, []byte("\n"))-1, 0) // less the header
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read /proc/net/ip_vs_conn: %w", err)
	}
	if v, ok, err := get("/proc/net/ip_vs_stats"); err != nil {
		return err
	} else if ok && withLoad {
		rate, err := parseStatsRate(v)
		if err != nil {
			return err
		}
		r.ConnRate = rate
	}
	return nil
}

// readMachine reads the director's CPUs, its memory and whether the FTP helper is loaded.
func (r *Reading) readMachine(get func(string) (string, bool, error)) error {
	if v, ok, err := get("/sys/devices/system/cpu/online"); err != nil {
		return err
	} else if ok {
		r.CPUs = len(cpuList(v))
	}
	if v, ok, err := get("/proc/meminfo"); err != nil {
		return err
	} else if ok {
		for line := range strings.Lines(v) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				r.MemTotalKB, _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	_, ok, err := get("/sys/module/ip_vs_ftp/initstate")
	if err != nil {
		return err
	}
	r.FTPHelper = ok
	return nil
}

// readModprobe finds an "options ip_vs conn_tab_bits=N" in /etc/modprobe.d.
func (r *Reading) readModprobe(h Host) error {
	files, err := h.Glob("/etc/modprobe.d/*.conf")
	if err != nil {
		return fmt.Errorf("list /etc/modprobe.d: %w", err)
	}
	sort.Strings(files)
	for _, p := range files {
		b, err := h.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			if len(f) < 3 || f[0] != "options" || f[1] != "ip_vs" {
				continue
			}
			for _, kv := range f[2:] {
				if v, ok := strings.CutPrefix(kv, "conn_tab_bits="); ok {
					if n, err := strconv.Atoi(v); err == nil {
						r.ModprobeBits = n // the last one read wins, as modprobe's
					}
				}
			}
		}
	}
	return nil
}

func (r *Reading) readMH(h Host, get func(string) (string, bool, error)) error {
	r.MHTableSize, r.MHTableFrom = mhPrimes[12-8], "the Kconfig default (CONFIG_IP_VS_MH_TAB_INDEX=12)"
	rel, ok, err := get("/proc/sys/kernel/osrelease")
	if err != nil || !ok {
		return err
	}
	cfg, ok, err := get("/boot/config-" + rel)
	if err != nil || !ok {
		return err
	}
	for line := range strings.Lines(cfg) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "CONFIG_IP_VS_MH_TAB_INDEX="); ok {
			if n, err := strconv.Atoi(v); err == nil && n >= 8 && n-8 < len(mhPrimes) {
				r.MHTableSize, r.MHTableFrom = mhPrimes[n-8], "/boot/config-"+rel
			}
		}
	}
	return nil
}

func (r *Reading) readNICs(h Host, get func(string) (string, bool, error)) error {
	devs, err := h.Glob("/sys/class/net/*/device")
	if err != nil {
		return fmt.Errorf("list network devices: %w", err)
	}
	sort.Strings(devs)
	interrupts, _, err := get("/proc/interrupts")
	if err != nil {
		return err
	}
	for _, d := range devs {
		name := filepath.Base(filepath.Dir(d))
		n := NIC{Name: name}
		qs, err := h.Glob("/sys/class/net/" + name + "/queues/rx-*")
		if err != nil {
			return fmt.Errorf("list %s's queues: %w", name, err)
		}
		sort.Strings(qs)
		for _, q := range qs {
			mask, _, err := get(q + "/rps_cpus")
			if err != nil {
				return err
			}
			cnt, _, err := get(q + "/rps_flow_cnt")
			if err != nil {
				return err
			}
			c, _ := strconv.Atoi(cnt)
			n.RxQueues = append(n.RxQueues, Queue{Name: filepath.Base(q), RPSCPUs: mask, RPSFlowCnt: c})
		}
		for _, irq := range deviceIRQs(interrupts, name) {
			aff, ok, err := get("/proc/irq/" + irq + "/smp_affinity_list")
			if err != nil {
				return err
			}
			if ok {
				n.IRQCPUs = append(n.IRQCPUs, aff)
			}
		}
		r.NICs = append(r.NICs, n)
	}
	return nil
}

// deviceIRQs lists the interrupt numbers /proc/interrupts names after dev
// (eth0, eth0-TxRx-0, ...).
func deviceIRQs(interrupts, dev string) []string {
	var out []string
	for line := range strings.Lines(interrupts) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		irq, ok := strings.CutSuffix(f[0], ":")
		if _, err := strconv.Atoi(irq); !ok || err != nil {
			continue
		}
		last := f[len(f)-1]
		if last == dev || strings.HasPrefix(last, dev+"-") {
			out = append(out, irq)
		}
	}
	return out
}

// parseStatsRate reads the Conns/s of /proc/net/ip_vs_stats: the second
// row of hexadecimal figures (the first holds the totals).
func parseStatsRate(s string) (float64, error) {
	rows := 0
	for line := range strings.Lines(s) {
		f := strings.Fields(line)
		if len(f) != 5 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			continue // a heading
		}
		if rows++; rows == 2 {
			return float64(n), nil
		}
	}
	return 0, fmt.Errorf("read /proc/net/ip_vs_stats: no rate row in %q", s)
}

// cpuList expands a CPU list such as "0-3,8" into its CPUs.
func cpuList(s string) []int {
	var out []int
	for part := range strings.SplitSeq(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out
}
