package panel

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
	"github.com/ipvsctl/ipvsctl/server"
)

// redundancyFields are the redundancy form's fields, named as the
// document's settings.redundancy names them; "redundancy" is the toggle
// that adds or removes the block.
var redundancyFields = []string{"redundancy", "vrid", "interface", "advert_interval", "unicast_peers", "preempt", "preempt_delay",
	"sync_daemon", "sync_interface", "sync_id", "preempt_sync_wait", "track_interfaces", "garp_count", "garp_repeat_delay"}

func secondsText(s float64) string { return strconv.FormatFloat(s, 'f', -1, 64) }

// redundancyForm fills the form from the pair's configuration (nil: none).
func redundancyForm(r *ipvsmgr.Redundancy) *form {
	f := newForm()
	f.Values["preempt"] = "1"
	if r == nil {
		return f
	}
	f.Values["redundancy"] = "1"
	f.Values["vrid"] = strconv.Itoa(r.VRID)
	f.Values["interface"] = r.Interface
	if r.AdvertInterval != 0 {
		f.Values["advert_interval"] = secondsText(r.AdvertInterval)
	}
	f.Values["unicast_peers"] = strings.Join(r.UnicastPeers, "\n")
	if r.Preempt != nil && !*r.Preempt {
		f.Values["preempt"] = ""
	}
	if r.PreemptDelay != 0 {
		f.Values["preempt_delay"] = secondsText(r.PreemptDelay)
	}
	if r.SyncDaemon {
		f.Values["sync_daemon"] = "1"
	}
	f.Values["sync_interface"] = r.SyncInterface
	if r.SyncID != 0 {
		f.Values["sync_id"] = strconv.Itoa(r.SyncID)
	}
	if r.PreemptSyncWait != nil {
		f.Values["preempt_sync_wait"] = secondsText(*r.PreemptSyncWait)
	}
	f.Values["track_interfaces"] = strings.Join(r.TrackInterfaces, "\n")
	if r.GARPCount != nil {
		f.Values["garp_count"] = strconv.Itoa(*r.GARPCount)
	}
	if r.GARPRepeatDelay != nil {
		f.Values["garp_repeat_delay"] = secondsText(*r.GARPRepeatDelay)
	}
	return f
}

// listField reads a list written one a line or comma separated.
func (f *form) listField(name string) []string {
	return strings.FieldsFunc(f.V(name), func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

// optSeconds reads seconds where blank means the default (0).
func (f *form) optSeconds(name string) float64 {
	if f.V(name) == "" {
		return 0
	}
	return f.secondsField(name, f.V(name))
}

// parseRedundancyForm reads a posted redundancy form: nil when the toggle
// is off (the pair is removed). old is the configuration it edits, whose
// explicit preempt: true it keeps.
func parseRedundancyForm(r *http.Request, old *ipvsmgr.Redundancy) (*form, *ipvsmgr.Redundancy) {
	f := newForm()
	for _, k := range redundancyFields {
		f.Values[k] = strings.TrimSpace(r.PostFormValue(k))
	}
	if f.V("redundancy") == "" {
		return f, nil
	}
	red := &ipvsmgr.Redundancy{
		VRID: f.intField("vrid"), Interface: f.V("interface"), AdvertInterval: f.optSeconds("advert_interval"),
		UnicastPeers: f.listField("unicast_peers"), PreemptDelay: f.optSeconds("preempt_delay"), SyncDaemon: f.V("sync_daemon") != "",
		SyncInterface: f.V("sync_interface"), SyncID: f.intField("sync_id"), TrackInterfaces: f.listField("track_interfaces"),
	}
	if old != nil {
		// The form does not edit the adverts' authentication, the
		// instance's name, its programs and mail, nor its sync group:
		// they stay.
		red.Auth, red.Instance, red.SMTPAlert, red.SyncGroup = old.Auth, old.Instance, old.SMTPAlert, old.SyncGroup
		red.VRRPNotify = old.VRRPNotify
	}
	if f.V("vrid") == "" {
		f.set("vrid", "a pair needs its virtual router's id, 1..255, the same on both directors")
	}
	switch on := f.V("preempt") != ""; {
	case !on:
		red.Preempt = &on
	case old != nil && old.Preempt != nil:
		red.Preempt = &on
	}
	if f.V("preempt_sync_wait") != "" {
		s := f.secondsField("preempt_sync_wait", f.V("preempt_sync_wait"))
		red.PreemptSyncWait = &s
	}
	if f.V("garp_count") != "" {
		n := f.intField("garp_count")
		red.GARPCount = &n
	}
	if f.V("garp_repeat_delay") != "" {
		s := f.secondsField("garp_repeat_delay", f.V("garp_repeat_delay"))
		red.GARPRepeatDelay = &s
	}
	return f, red
}

// redundancyField is the form field a core problem's path names:
// settings.redundancy.unicast_peers[1] -> unicast_peers (and which entry, for a list).
func redundancyField(path string) (name, entry string) {
	rest, ok := strings.CutPrefix(path, "settings.redundancy")
	if !ok {
		return "", ""
	}
	rest = strings.TrimPrefix(rest, ".")
	if rest == "" {
		return "redundancy", ""
	}
	if i := strings.IndexByte(rest, '['); i >= 0 {
		n, _ := strconv.Atoi(strings.TrimSuffix(rest[i+1:], "]"))
		return rest[:i], "entry " + strconv.Itoa(n+1) + ": "
	}
	return rest, ""
}

// takeRedundancyErr puts a core error beside the redundancy field it names.
func (f *form) takeRedundancyErr(err error) {
	var ve *ipvsmgr.ValidationError
	if !errors.As(err, &ve) {
		f.Top = append(f.Top, err.Error())
		return
	}
	for _, pr := range ve.Problems {
		if name, entry := redundancyField(pr.Field); name != "" && contains(redundancyFields, name) {
			f.set(name, entry+pr.Message)
		} else {
			f.Top = append(f.Top, pr.Error())
		}
	}
}

func (p *Panel) redundancySave(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	cur, _, _, err := p.desired(ctx, u)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	f, red := parseRedundancyForm(r, cur.Settings.Redundancy)
	d := &settingsData{Form: settingsForm(&cur.Settings), RedForm: f, Base: baseOf(r), Drafted: p.staging(ctx, r, u)}
	if f.Invalid() {
		p.showSettings(w, r, u, http.StatusUnprocessableEntity, d)
		return
	}
	// settings.redundancy only: the other settings and the services stay.
	label := "redundancy"
	if red == nil {
		label = "redundancy removed"
	}
	patch := server.SettingsPatch{Redundancy: red}
	if red == nil {
		patch.Redundancy = &ipvsmgr.Redundancy{} // empty: removes it
	}
	msg, err := p.commit(ctx, r, u, label, server.SettingsEdit(patch), d.Base)
	if err != nil {
		switch server.CodeOf(err) {
		case server.CodeInvalid, server.CodeBadInput, server.CodeMalformed:
			f.takeRedundancyErr(err)
			p.showSettings(w, r, u, http.StatusUnprocessableEntity, d)
		case server.CodeStale:
			p.showStale(w, r, u, err)
		default:
			p.fail(w, r, u, err)
		}
		return
	}
	redirect(w, r, "/settings#redundancy", msg)
}

// nodeSave sets this director's own VRRP priority: node-local, not a
// revision (the core's SetNode, as ipvsctl node set --priority).
func (p *Panel) nodeSave(w http.ResponseWriter, r *http.Request, u who) {
	ctx := r.Context()
	f := newForm()
	f.Values["priority"] = strings.TrimSpace(r.PostFormValue("priority"))
	n := f.intField("priority")
	if f.V("priority") == "" {
		f.set("priority", "a priority is needed, 1..255")
	}
	if !f.Invalid() {
		_, err := p.core.SetNode(ctx, p.actor(r, u), server.NodePatch{Priority: &n})
		switch {
		case err == nil:
			redirect(w, r, "/settings#redundancy", "this director's priority is now "+strconv.Itoa(n))
			return
		case server.CodeOf(err) == server.CodeBadInput:
			msg, _ := strings.CutPrefix(err.Error(), "priority: ")
			f.set("priority", msg)
		default:
			p.fail(w, r, u, err)
			return
		}
	}
	cur, rev, drafted, err := p.desired(ctx, u)
	if err != nil {
		p.fail(w, r, u, err)
		return
	}
	p.showSettings(w, r, u, http.StatusUnprocessableEntity, &settingsData{Form: settingsForm(&cur.Settings), NodeForm: f, Base: rev, Drafted: drafted})
}
