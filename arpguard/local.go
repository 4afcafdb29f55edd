package arpguard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// System is the real server's kernel as the local executor changes it. The
// netlink implementation drives the host; tests drive a fake that records
// what it was asked.
type System interface {
	ReadSysctl(key string) (string, error)
	WriteSysctl(key, value string) error
	ModuleLoaded(name string) (bool, error)
	LoadModule(ctx context.Context, name string) error
	UnloadModule(ctx context.Context, name string) error
	LinkUp(dev string) (bool, error)
	SetLinkUp(dev string, up bool) error
	HasAddress(p netip.Prefix, dev string) (bool, error)
	AddAddress(p netip.Prefix, dev string) error
	DelAddress(p netip.Prefix, dev string) error
	HasArpRule(ctx context.Context, chain string, args []string) (bool, error)
	AppendArpRule(ctx context.Context, chain string, args []string) error
	DeleteArpRule(ctx context.Context, chain string, args []string) error
	// RouteAt returns the main-table route to dst with the given metric.
	RouteAt(dst netip.Prefix, metric int) (RouteSpec, bool, error)
	ReplaceRoute(r RouteSpec) error
	DeleteRoute(r RouteSpec) error
}

// Local applies a plan on the machine it runs on, journals what it changed,
// and undoes it. Files are written through the os package at Paths.
type Local struct {
	Sys    System
	Paths  Paths
	Logger *slog.Logger
}

// Apply makes every step true and returns the steps it had to change; none
// when the real server was already prepared.
func (l *Local) Apply(ctx context.Context, steps []Step) ([]Step, error) {
	j, err := openJournal(l.Paths.Journal)
	if err != nil {
		return nil, err
	}
	// The journal cannot record its own directory before it exists: create
	// the missing levels, then record them.
	missing := missingDirs(filepath.Dir(l.Paths.Journal))
	if err := os.MkdirAll(filepath.Dir(l.Paths.Journal), 0o755); err != nil {
		return nil, fmt.Errorf("create journal directory: %w", err)
	}
	for _, d := range missing {
		if err := j.add("dir "+d, ""); err != nil {
			return nil, err
		}
	}
	var changed []Step
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return changed, fmt.Errorf("apply %s: %w", s, err)
		}
		ok, err := l.holds(ctx, s)
		if err != nil {
			return changed, fmt.Errorf("check %s: %w", s, err)
		}
		if ok {
			continue
		}
		if err := l.apply(ctx, j, s); err != nil {
			return changed, fmt.Errorf("apply %s: %w", s, err)
		}
		l.Logger.Info("real server changed", "step", s.String())
		changed = append(changed, s)
	}
	return changed, nil
}

// Check returns the steps not in effect.
func (l *Local) Check(ctx context.Context, steps []Step) ([]Step, error) {
	var drift []Step
	for _, s := range steps {
		ok, err := l.holds(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", s, err)
		}
		if !ok {
			drift = append(drift, s)
		}
	}
	return drift, nil
}

func (l *Local) holds(ctx context.Context, s Step) (bool, error) {
	switch s := s.(type) {
	case Sysctl:
		v, err := l.Sys.ReadSysctl(s.Key)
		return v == s.Value, err
	case Module:
		return l.Sys.ModuleLoaded(s.Name)
	case LinkUp:
		return l.Sys.LinkUp(s.Dev)
	case Address:
		return l.Sys.HasAddress(s.Prefix, s.Dev)
	case ArpRule:
		return l.Sys.HasArpRule(ctx, s.Chain, s.Args)
	case Route:
		r, ok, err := l.Sys.RouteAt(s.Dst, s.metric())
		return ok && r.Gateway == s.Gateway, err
	case File:
		b, err := os.ReadFile(s.Path)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return bytes.Equal(b, []byte(s.Content)), err
	case Symlink:
		t, err := os.Readlink(s.Path)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return t == s.Target, err
	}
	return false, fmt.Errorf("unknown step %T", s)
}

func (l *Local) apply(ctx context.Context, j *journal, s Step) error {
	switch s := s.(type) {
	case Sysctl:
		prev, err := l.Sys.ReadSysctl(s.Key)
		if err != nil {
			return err
		}
		if err := j.add(journalSysctl(s), prev); err != nil {
			return err
		}
		return l.Sys.WriteSysctl(s.Key, s.Value)
	case Module:
		if err := j.add("module "+s.Name, ""); err != nil {
			return err
		}
		return l.Sys.LoadModule(ctx, s.Name)
	case LinkUp:
		if err := j.add("linkup "+s.Dev, ""); err != nil {
			return err
		}
		return l.Sys.SetLinkUp(s.Dev, true)
	case Address:
		if err := j.add(fmt.Sprintf("address %s %s", s.Prefix, s.Dev), ""); err != nil {
			return err
		}
		return l.Sys.AddAddress(s.Prefix, s.Dev)
	case ArpRule:
		if err := j.add("arptables "+s.Chain+" "+strings.Join(s.Args, " "), ""); err != nil {
			return err
		}
		return l.Sys.AppendArpRule(ctx, s.Chain, s.Args)
	case Route:
		prev, ok, err := l.Sys.RouteAt(s.Dst, s.metric())
		if err != nil {
			return err
		}
		p := ""
		if ok {
			p = prev.String()
		}
		if err := j.add(journalRoute(s), p); err != nil {
			return err
		}
		return l.Sys.ReplaceRoute(RouteSpec{Dst: s.Dst, Gateway: s.Gateway, Metric: s.metric()})
	case File:
		if err := l.ensureDir(j, filepath.Dir(s.Path)); err != nil {
			return err
		}
		if _, err := os.Lstat(s.Path); errors.Is(err, fs.ErrNotExist) {
			if err := j.add("file "+s.Path, ""); err != nil {
				return err
			}
		}
		return writeFileAtomic(s.Path, []byte(s.Content), s.Perm)
	case Symlink:
		if err := l.ensureDir(j, filepath.Dir(s.Path)); err != nil {
			return err
		}
		if _, err := os.Lstat(s.Path); errors.Is(err, fs.ErrNotExist) {
			if err := j.add("file "+s.Path, ""); err != nil {
				return err
			}
		} else if err := os.Remove(s.Path); err != nil {
			return err
		}
		return os.Symlink(s.Target, s.Path)
	}
	return fmt.Errorf("unknown step %T", s)
}

// ensureDir creates dir and its missing parents, recording each, outermost first.
func (l *Local) ensureDir(j *journal, dir string) error {
	for _, d := range missingDirs(dir) {
		if err := j.add("dir "+d, ""); err != nil {
			return err
		}
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create directory: %w", err)
		}
	}
	return nil
}

// missingDirs lists dir and those of its parents that do not exist, outermost first.
func missingDirs(dir string) []string {
	var out []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		out = append([]string{d}, out...)
	}
	return out
}

func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Undo reverts, newest first, every change the journal records and removes
// the journal. A record that fails stays journaled with the others; every
// revert is guarded, so undo can simply run again.
func (l *Local) Undo(ctx context.Context) ([]string, error) {
	j, err := openJournal(l.Paths.Journal)
	if err != nil {
		return nil, err
	}
	var undone []string
	var errs []error
	var dirs []string
	for _, line := range slices.Backward(j.lines) {
		if err := ctx.Err(); err != nil {
			return undone, fmt.Errorf("undo %q: %w", line, err)
		}
		// Directories go last, once the files in them (the journal
		// among them) are gone.
		if strings.HasPrefix(line, "dir ") {
			dirs = append(dirs, line)
			continue
		}
		if err := l.undo(ctx, line); err != nil {
			errs = append(errs, fmt.Errorf("undo %q: %w", line, err))
			continue
		}
		l.Logger.Info("real server change undone", "record", line)
		undone = append(undone, line)
	}
	if len(errs) > 0 {
		return undone, errors.Join(errs...)
	}
	if err := os.Remove(l.Paths.Journal); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return undone, fmt.Errorf("remove journal: %w", err)
	}
	for _, line := range dirs {
		// Not empty: something else lives there now, and stays.
		if err := os.Remove(strings.TrimPrefix(line, "dir ")); err == nil {
			undone = append(undone, line)
		}
	}
	return undone, nil
}

// journalUndo is, for each kind of journal record, how many fields follow
// its kind at least and how to take it back.
var journalUndo = map[string]struct {
	fields int
	undo   func(l *Local, ctx context.Context, f []string) error
}{
	"sysctl":    {3, (*Local).undoSysctl},
	"module":    {1, (*Local).undoModule},
	"linkup":    {1, (*Local).undoLinkUp},
	"address":   {2, (*Local).undoAddress},
	"arptables": {2, (*Local).undoArpRule},
	"route":     {2, (*Local).undoRoute},
	"file":      {1, (*Local).undoFile},
}

// undo takes back what one journal record says the preparation did.
func (l *Local) undo(ctx context.Context, line string) error {
	f := strings.Fields(line)
	r, ok := journalUndo[f[0]]
	if !ok {
		return fmt.Errorf("unknown journal record %q", f[0])
	}
	if len(f) < r.fields+1 {
		return errors.New("malformed journal record")
	}
	return r.undo(l, ctx, f)
}

// undoSysctl writes back the value a sysctl had.
func (l *Local) undoSysctl(_ context.Context, f []string) error {
	return l.Sys.WriteSysctl(f[1], f[3])
}

// undoModule unloads a module the preparation loaded.
func (l *Local) undoModule(ctx context.Context, f []string) error {
	if err := l.Sys.UnloadModule(ctx, f[1]); err != nil {
		// Still in use by a tunnel that is not ours: leaving it loaded is right.
		l.Logger.Warn("module left loaded", "module", f[1], "err", err)
	}
	return nil
}

// undoLinkUp sets down a link the preparation set up, if it is still up.
func (l *Local) undoLinkUp(_ context.Context, f []string) error {
	up, err := l.Sys.LinkUp(f[1])
	if err != nil || !up {
		return err
	}
	return l.Sys.SetLinkUp(f[1], false)
}

// undoAddress removes an address the preparation added, if it is still there.
func (l *Local) undoAddress(_ context.Context, f []string) error {
	p, err := netip.ParsePrefix(f[1])
	if err != nil {
		return err
	}
	has, err := l.Sys.HasAddress(p, f[2])
	if err != nil || !has {
		return err
	}
	return l.Sys.DelAddress(p, f[2])
}

// undoArpRule deletes an arptables rule the preparation added, if it is still there.
func (l *Local) undoArpRule(ctx context.Context, f []string) error {
	has, err := l.Sys.HasArpRule(ctx, f[1], f[2:])
	if err != nil || !has {
		return err
	}
	return l.Sys.DeleteArpRule(ctx, f[1], f[2:])
}

// undoRoute deletes the route the preparation added, if it is still ours,
// and puts back the one it replaced, if any.
func (l *Local) undoRoute(_ context.Context, f []string) error {
	dst, err := netip.ParsePrefix(f[1])
	if err != nil {
		return err
	}
	gw, err := netip.ParseAddr(f[2])
	if err != nil {
		return err
	}
	ours := Route{Dst: dst, Gateway: gw}
	cur, ok, err := l.Sys.RouteAt(dst, ours.metric())
	if err != nil {
		return err
	}
	if ok && cur.Gateway == gw {
		if err := l.Sys.DeleteRoute(RouteSpec{Dst: dst, Gateway: gw, Metric: ours.metric()}); err != nil {
			return err
		}
	}
	if len(f) == 3 {
		return nil
	}
	prev, err := parseRouteSpec(dst, f[3:])
	if err != nil {
		return err
	}
	return l.Sys.ReplaceRoute(prev)
}

// undoFile removes a file the preparation wrote; one already gone is fine.
func (l *Local) undoFile(_ context.Context, f []string) error {
	if err := os.Remove(f[1]); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// driftSummary is the status words for a set of steps not in effect.
func driftSummary(drift []Step) string {
	if len(drift) == 0 {
		return "prepared"
	}
	words := make([]string, len(drift))
	for i, s := range drift {
		words[i] = s.Drift()
	}
	return "drift: " + strings.Join(words, "; ")
}
