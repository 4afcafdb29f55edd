package redundancy

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/ipvsmgr/vrrp"
)

// The adverts' keys are read from the files settings.redundancy.auth names,
// on this director; they live in memory only, never in the store, a
// revision, a log line or the API. A key file read well once and unreadable
// since keeps its last key (the error is shown); a key never read is left
// out, and without the signing key the director is in fault rather than
// speaking VRRP unauthenticated.

// keyFile is what was last read from one key file.
type keyFile struct {
	stat   string // size, mtime, inode: a change means read it again
	secret []byte // nil: never read well
	err    string // the last read's error, "" when it succeeded
}

// authKeys reads (when they changed) the key files of a, and returns the
// configuration of the instances' vrrp.Auth, a fingerprint of it (to see
// a change without keeping a copy of the keys), and the problems with the
// files. cfg is nil when the signing key is missing.
func (r *redRunner) authKeys(a *ipvsmgr.RedundancyAuth, advert time.Duration) (cfg *vrrp.AuthConfig, fp string, problems []string) {
	if r.keyFiles == nil {
		r.keyFiles = map[string]*keyFile{}
	}
	mode := vrrp.AuthEnforce
	if a.Mode != "" {
		mode, _ = vrrp.ParseAuthMode(a.Mode)
	}
	c := &vrrp.AuthConfig{ActiveKey: uint8(a.Active()), Mode: mode, Monotonic: a.AntiReplay == "monotonic"}
	if !c.Monotonic {
		c.Window = vrrp.DefaultWindow(advert)
		if a.TimeWindow != 0 {
			c.Window = time.Duration(a.TimeWindow) * time.Second
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d|%s|%v|%s", c.ActiveKey, c.Mode, c.Monotonic, c.Window)
	seen := map[string]bool{}
	active := false
	for _, k := range a.Keys {
		kf := r.readKeyFile(k.File)
		seen[k.File] = true
		if kf.err != "" {
			problems = append(problems, fmt.Sprintf("key %d: %s", k.ID, kf.err))
		}
		if kf.secret == nil {
			continue
		}
		c.Keys = append(c.Keys, vrrp.AuthKey{ID: uint8(k.ID), Secret: kf.secret})
		active = active || k.ID == a.Active()
		fmt.Fprintf(h, "|%d:", k.ID)
		h.Write(kf.secret)
	}
	for path := range r.keyFiles {
		if !seen[path] {
			delete(r.keyFiles, path) // a key the document no longer names is forgotten
		}
	}
	if !active && mode != vrrp.AuthReceiveOnly || len(c.Keys) == 0 {
		return nil, "", problems
	}
	if err := c.Validate(); err != nil {
		return nil, "", append(problems, err.Error())
	}
	return c, fmt.Sprintf("%x", h.Sum(nil)), problems
}

// readKeyFile reads one key file again when its size, time or inode moved.
func (r *redRunner) readKeyFile(path string) *keyFile {
	kf := r.keyFiles[path]
	if kf == nil {
		kf = &keyFile{}
		r.keyFiles[path] = kf
	}
	st, err := os.Stat(path)
	stat := ""
	if err == nil {
		var ino uint64
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			ino = sys.Ino
		}
		stat = fmt.Sprintf("%d|%d|%d|%v", st.Size(), st.ModTime().UnixNano(), ino, st.Mode())
	}
	if stat != "" && stat == kf.stat {
		return kf
	}
	kf.stat = stat
	secret, err := vrrp.ReadKeyFile(path)
	if err != nil {
		kf.err = err.Error()
		if errors.Is(err, os.ErrNotExist) {
			kf.err = "key file " + path + ": no such file"
		}
		return kf
	}
	kf.secret, kf.err = secret, ""
	return kf
}

// authSetter is a conn whose authentication can change as it runs
// (vrrp.RawConn).
type authSetter interface{ SetAuth(*vrrp.Auth) }

// followAuth loads the keys and gives the running instances the
// authentication the document asks for, without a restart: keys added,
// rotated or removed, a new mode or window reach the running vrrp.Auth
// (Update), and turning it on or off the conn (SetAuth). It returns why
// the director cannot be master ("" when it can): the signing key is
// missing. It never turns authentication off because of an error.
func (r *redRunner) followAuth(red *ipvsmgr.Redundancy) string {
	var cfg *vrrp.AuthConfig
	fp, fault := "", ""
	var problems []string
	if red.Auth != nil {
		cfg, fp, problems = r.authKeys(red.Auth, red.Advert())
		if cfg == nil {
			fault = "VRRP adverts cannot be signed: " + strings.Join(problems, "; ")
			if len(problems) == 0 {
				fault = fmt.Sprintf("VRRP adverts cannot be signed: no key %d", red.Auth.Active())
			}
		}
	} else {
		clear(r.keyFiles)
	}
	msg := strings.Join(problems, "; ")
	r.mu.Lock()
	changed := msg != r.authErr
	r.authErr, r.authCfg, r.authFP = msg, cfg, fp
	r.mu.Unlock()
	if changed && msg != "" {
		r.log.Error("VRRP authentication keys", "err", msg)
	} else if changed {
		r.log.Info("VRRP authentication keys read")
	}
	if red.Auth != nil && cfg == nil {
		return fault // keep what the instances have: never a fall back to no authentication
	}
	for _, ri := range r.insts {
		r.giveAuth(ri, cfg, fp)
	}
	return ""
}

// giveAuth hands one running instance its authentication.
func (r *redRunner) giveAuth(ri *runningInst, cfg *vrrp.AuthConfig, fp string) {
	if fp == ri.authFP {
		return
	}
	set, ok := ri.conn.(authSetter)
	switch {
	case cfg == nil && ri.auth != nil:
		if !ok {
			return
		}
		set.SetAuth(nil)
		r.mu.Lock()
		ri.auth = nil
		r.mu.Unlock()
		r.log.Warn("VRRP adverts no longer authenticated (settings.redundancy.auth removed)", "family", familyName(ri.v4))
	case cfg != nil && ri.auth == nil:
		a, err := vrrp.NewAuth(*cfg)
		if err != nil || !ok {
			r.log.Error("VRRP authentication not turned on", "family", familyName(ri.v4), "err", err)
			return
		}
		set.SetAuth(a)
		r.mu.Lock()
		ri.auth = a
		r.mu.Unlock()
		r.log.Info("VRRP adverts authenticated now, without a restart", "family", familyName(ri.v4), "auth", a.Describe())
	case cfg != nil:
		if err := ri.auth.Update(*cfg); err != nil {
			r.log.Error("VRRP authentication not changed", "family", familyName(ri.v4), "err", err)
			return
		}
		r.log.Info("VRRP authentication changed, without a restart", "family", familyName(ri.v4), "auth", ri.auth.Describe())
	}
	ri.authFP = fp
}

// newAuth is a new instance's authentication (nil: none).
func (r *redRunner) newAuth() (*vrrp.Auth, string) {
	r.mu.Lock()
	cfg, fp := r.authCfg, r.authFP
	r.mu.Unlock()
	if cfg == nil {
		return nil, ""
	}
	a, err := vrrp.NewAuth(*cfg)
	if err != nil {
		r.log.Error("VRRP authentication", "err", err)
		return nil, ""
	}
	return a, fp
}

// warnUnauthenticated says once per configuration what an unauthenticated
// one lets a host on the link do.
func (r *redRunner) warnUnauthenticated(red *ipvsmgr.Redundancy) {
	if red.Auth != nil {
		return
	}
	if len(red.UnicastPeers) > 0 {
		r.log.Warn("VRRP adverts are not authenticated (no settings.redundancy.auth): adverts from addresses outside peers are dropped, "+
			"but a host on the link that forges a peer's source address can take the VIPs (priority 255) or force a failover (priority 0)",
			"interface", red.Interface)
		return
	}
	r.log.Warn("VRRP adverts are not authenticated (no settings.redundancy.auth, no peers): any host on the link can take the VIPs "+
		"with a forged advert (priority 255) or force a failover (priority 0)", "interface", red.Interface)
}

// instAuth is a running instance's authentication in words ("" without
// an instance).
func (r *redRunner) instAuth(v4 bool) string {
	r.mu.Lock()
	ri := r.insts[v4]
	var a *vrrp.Auth
	if ri != nil {
		a = ri.auth
	}
	r.mu.Unlock()
	switch {
	case ri == nil:
		return ""
	case a == nil:
		return "none"
	}
	return a.Describe()
}

// connStats are a conn's dropped adverts by reason, nil for a conn that
// does not count them.
func connStats(c vrrp.Conn) map[string]uint64 {
	sc, ok := c.(interface{ Stats() vrrp.ConnStats })
	if !ok {
		return nil
	}
	return sc.Stats().ByReason()
}
