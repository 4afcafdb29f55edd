package tune

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"
)

// The files Apply writes.
const (
	SysctlFile   = "/etc/sysctl.d/90-ipvsctl.conf"
	ModprobeFile = "/etc/modprobe.d/ipvsctl.conf"
)

const fileHeader = "# Written by `ipvsctl tune apply`; `ipvsctl tune undo` restores what was here before.\n"

// Plan is what Apply would do: files to write and sysctls to set now.
type Plan struct {
	Files []FileChange `json:"files"`
	Live  []LiveChange `json:"live"`
	// Reload is said when the module option changes: it needs ip_vs loaded
	// again to take effect.
	Reload string `json:"reload,omitempty"`
}

// FileChange is one file's content before (nil: absent) and after (nil: removed).
type FileChange struct {
	Path string  `json:"path"`
	Old  *string `json:"old"`
	New  *string `json:"new"`
}

// LiveChange is one sysctl set now.
type LiveChange struct {
	Name string `json:"name"`
	From string `json:"from"`
	To   string `json:"to"`
}

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool { return len(p.Files) == 0 && len(p.Live) == 0 }

// NewPlan is what applying the findings would change on h. The files keep
// what an earlier apply wrote for settings that are fine now, so applying
// twice changes nothing the second time.
func NewPlan(h Host, findings []Finding) (*Plan, error) {
	p := &Plan{}
	sysOld, err := readOptional(h, SysctlFile)
	if err != nil {
		return nil, err
	}
	kept := parseSysctlFile(sysOld)
	var lines []string
	written := map[string]bool{}
	for _, f := range findings {
		if f.Kind != KindSysctl || f.Value == "" {
			continue
		}
		switch {
		case f.Status == Change || f.Status == Far:
			lines = append(lines, f.Setting+" = "+f.Value)
			written[f.Setting] = true
			p.Live = append(p.Live, LiveChange{Name: f.Setting, From: f.Current, To: f.Value})
		case kept[f.Setting] != "":
			lines = append(lines, f.Setting+" = "+kept[f.Setting])
			written[f.Setting] = true
		}
	}
	// Settings of an earlier apply that no finding covers now stay.
	for _, name := range sortedKeys(kept) {
		if !written[name] {
			lines = append(lines, name+" = "+kept[name])
		}
	}
	p.addFile(SysctlFile, sysOld, lines)

	modOld, err := readOptional(h, ModprobeFile)
	if err != nil {
		return nil, err
	}
	var modLines []string
	for _, f := range findings {
		if f.Kind != KindModule || f.Value == "" {
			continue
		}
		if f.Status == Change || f.Status == Far {
			modLines = append(modLines, "options ip_vs conn_tab_bits="+f.Value)
		} else if modOld != nil {
			for line := range strings.Lines(*modOld) {
				if strings.HasPrefix(line, "options ip_vs ") {
					modLines = append(modLines, strings.TrimSpace(line))
				}
			}
		}
	}
	if p.addFile(ModprobeFile, modOld, modLines) {
		p.Reload = "conn_tab_bits takes effect only when ip_vs is next loaded: reboot, or stop ipvsctl, run `ipvsadm -C`, `modprobe -r` every ip_vs module and start ipvsctl again (that drops every connection)"
	}
	return p, nil
}

// addFile adds the change of path to lines (none: nothing to write) and
// reports whether it changes anything.
func (p *Plan) addFile(path string, old *string, lines []string) bool {
	var next *string
	if len(lines) > 0 {
		s := fileHeader + strings.Join(lines, "\n") + "\n"
		next = &s
	} else if old != nil {
		// Nothing of ours to keep: leave the file as it is.
		return false
	}
	if (old == nil) == (next == nil) && (old == nil || *old == *next) {
		return false
	}
	p.Files = append(p.Files, FileChange{Path: path, Old: old, New: next})
	return true
}

// Diff is the plan as a reader sees it: each file's lines removed and
// added, then the sysctls set now.
func (p *Plan) Diff() string {
	var b strings.Builder
	for _, f := range p.Files {
		switch {
		case f.Old == nil:
			fmt.Fprintf(&b, "%s (new file)\n", f.Path)
		case f.New == nil:
			fmt.Fprintf(&b, "%s (removed)\n", f.Path)
		default:
			fmt.Fprintf(&b, "%s\n", f.Path)
		}
		old, next := lineSet(f.Old), lineSet(f.New)
		for _, l := range lines(f.Old) {
			if !next[l] {
				fmt.Fprintf(&b, "- %s\n", l)
			}
		}
		for _, l := range lines(f.New) {
			if !old[l] {
				fmt.Fprintf(&b, "+ %s\n", l)
			}
		}
	}
	for _, l := range p.Live {
		fmt.Fprintf(&b, "sysctl %s: %s -> %s (now)\n", l.Name, l.From, l.To)
	}
	if p.Reload != "" {
		fmt.Fprintf(&b, "note: %s\n", p.Reload)
	}
	return b.String()
}

// saved is what Apply keeps to undo: each file as it was before the first
// apply, and each sysctl's value before it was first set.
type saved struct {
	At      time.Time         `json:"at"`
	Files   []savedFile       `json:"files"`
	Sysctls map[string]string `json:"sysctls"`
}

type savedFile struct {
	Path    string `json:"path"`
	Existed bool   `json:"existed"`
	Content string `json:"content,omitempty"`
}

// Apply saves what the plan changes to undoPath (keeping what an earlier
// apply saved: undo goes back to before the first), writes the files, sets
// the sysctls now and reads them back.
func Apply(h Host, p *Plan, undoPath string, now time.Time) error {
	sv, err := readSaved(h, undoPath)
	if err != nil {
		return err
	}
	if sv == nil {
		sv = &saved{At: now, Sysctls: map[string]string{}}
	}
	for _, f := range p.Files {
		if !sv.hasFile(f.Path) {
			s := savedFile{Path: f.Path, Existed: f.Old != nil}
			if f.Old != nil {
				s.Content = *f.Old
			}
			sv.Files = append(sv.Files, s)
		}
	}
	for _, l := range p.Live {
		if _, ok := sv.Sysctls[l.Name]; !ok {
			sv.Sysctls[l.Name] = l.From
		}
	}
	b, err := json.MarshalIndent(sv, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the undo record: %w", err)
	}
	if err := h.WriteFile(undoPath, b, 0o600); err != nil {
		return fmt.Errorf("save the undo record %s: %w", undoPath, err)
	}
	for _, f := range p.Files {
		if err := writeOrRemove(h, f.Path, f.New); err != nil {
			return err
		}
	}
	var errs []error
	for _, l := range p.Live {
		if err := setSysctl(h, l.Name, l.To); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Undo puts back what undoPath saved: the files as they were and the
// sysctls' earlier values, then removes the record. It returns what it did
// as a plan; errors.Is(err, fs.ErrNotExist) when there is nothing to undo.
func Undo(h Host, undoPath string) (*Plan, error) {
	sv, err := readSaved(h, undoPath)
	if err != nil {
		return nil, err
	}
	if sv == nil {
		return nil, fmt.Errorf("nothing to undo: no record at %s: %w", undoPath, fs.ErrNotExist)
	}
	p := &Plan{}
	for _, f := range sv.Files {
		cur, err := readOptional(h, f.Path)
		if err != nil {
			return nil, err
		}
		var want *string
		if f.Existed {
			want = &f.Content
		}
		if err := writeOrRemove(h, f.Path, want); err != nil {
			return nil, err
		}
		p.Files = append(p.Files, FileChange{Path: f.Path, Old: cur, New: want})
	}
	var errs []error
	for _, name := range sortedKeys(sv.Sysctls) {
		prev := sv.Sysctls[name]
		if strings.HasPrefix(prev, "absent") {
			continue // it did not exist then: nothing to put back
		}
		cur, _ := readOptional(h, SysctlPath(name))
		from := ""
		if cur != nil {
			from = strings.TrimSpace(*cur)
		}
		if err := setSysctl(h, name, prev); err != nil {
			errs = append(errs, err)
			continue
		}
		p.Live = append(p.Live, LiveChange{Name: name, From: from, To: prev})
	}
	if len(errs) > 0 {
		return p, errors.Join(errs...)
	}
	if err := h.Remove(undoPath); err != nil {
		return p, fmt.Errorf("remove the undo record %s: %w", undoPath, err)
	}
	return p, nil
}

func (s *saved) hasFile(path string) bool {
	for _, f := range s.Files {
		if f.Path == path {
			return true
		}
	}
	return false
}

func readSaved(h Host, path string) (*saved, error) {
	b, err := readOptional(h, path)
	if err != nil || b == nil {
		return nil, err
	}
	var sv saved
	if err := json.Unmarshal([]byte(*b), &sv); err != nil {
		return nil, fmt.Errorf("read the undo record %s: %w", path, err)
	}
	if sv.Sysctls == nil {
		sv.Sysctls = map[string]string{}
	}
	return &sv, nil
}

func setSysctl(h Host, name, value string) error {
	p := SysctlPath(name)
	if err := h.WriteFile(p, []byte(value+"\n"), 0o644); err != nil {
		return fmt.Errorf("set sysctl %s=%s: %w", name, value, err)
	}
	got, err := readOptional(h, p)
	if err != nil {
		return err
	}
	if got == nil || strings.Join(strings.Fields(*got), " ") != value {
		return fmt.Errorf("set sysctl %s=%s: the kernel reads back %q", name, value, deref(got))
	}
	return nil
}

func writeOrRemove(h Host, path string, content *string) error {
	if content == nil {
		if err := h.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		return nil
	}
	if err := h.WriteFile(path, []byte(*content), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func readOptional(h Host, path string) (*string, error) {
	b, err := h.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	s := string(b)
	return &s, nil
}

// parseSysctlFile reads "name = value" lines (sysctl.d(5)).
func parseSysctlFile(s *string) map[string]string {
	out := map[string]string{}
	for _, l := range lines(s) {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, ";") {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

func lines(s *string) []string {
	if s == nil {
		return nil
	}
	var out []string
	for l := range strings.Lines(*s) {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func lineSet(s *string) map[string]bool {
	m := map[string]bool{}
	for _, l := range lines(s) {
		m[l] = true
	}
	return m
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func deref(s *string) string {
	if s == nil {
		return "nothing"
	}
	return *s
}
