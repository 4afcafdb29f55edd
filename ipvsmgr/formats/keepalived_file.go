package formats

import (
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// FILE_CHECK { track_file NAME; weight W [reverse|noreverse] } reads the
// number in the file of the top-level `track_file NAME { file PATH; weight
// W [reverse] }`, as check_file.c and track_file.c read them: the
// checker's weight, or (when it has none, or 0) the track_file's (default
// 1). It becomes a file check; keepalived watches the file with inotify,
// ipvsctl reads it every second, and acts on one reading (rise and fall 1).
func (k *kaImporter) fileCheck(scope string, n *kaNode) (*kaCheck, error) {
	scope += " " + n.header()
	var track *kaNode
	weight, reverse, weightSet := 0, false, false
	for _, c := range n.children {
		switch c.word(0) {
		case "track_file":
			if c.block || len(c.words) != 2 {
				return nil, k.errf(c.line, "want `track_file NAME`")
			}
			if track = k.trackFiles[c.word(1)]; track == nil {
				k.warnf(c.line, "track_file %s not found", c.word(1))
			}
		case "weight":
			w, rev, ok := k.trackWeight(c, 65535)
			if !ok {
				continue
			}
			weight, reverse, weightSet = w, rev, w != 0
		default:
			if err := k.unknownKeyword(scope, c); err != nil {
				return nil, err
			}
		}
	}
	if track == nil {
		k.warnf(n.line, "FILE_CHECK has no track_file specified - ignoring")
		return kaDropped, nil
	}
	path, tw, trev, err := k.trackFile(track)
	if err != nil {
		return nil, err
	}
	if !weightSet {
		weight, reverse = tw, trev
	}
	c := &ipvsmgr.Check{Type: "file", File: path, FileWeight: intPtr(weight), Interval: 1, Rise: 1, Fall: 1, StartHealthy: boolPtr(true)}
	if reverse {
		c.FileReverse = boolPtr(true)
	}
	lines := map[string]int{"": n.line, "type": n.line, "file": track.line, "file_weight": n.line, "interval": n.line, "rise": n.line, "fall": n.line, "start_healthy": n.line}
	return &kaCheck{check: c, lines: lines}, nil
}

// trackWeight reads `weight W [reverse|noreverse]`, bounded by ±limit; an
// out-of-range one is ignored with keepalived's warning.
func (k *kaImporter) trackWeight(c *kaNode, limit int) (int, bool, bool) {
	if len(c.words) < 2 {
		k.warnf(c.line, "track file weight missing")
		return 0, false, false
	}
	w, err := strconv.Atoi(c.word(1))
	if err != nil || w < -limit || w > limit {
		k.warnf(c.line, "weight for track file must be in [-%d..%d] inclusive. Ignoring...", limit, limit)
		return 0, false, false
	}
	reverse := false
	switch c.word(2) {
	case "":
	case "reverse":
		reverse = true
	case "noreverse":
	default:
		k.warnf(c.line, "unknown track file weight option %s - ignoring", c.word(2))
		return 0, false, false
	}
	return w, reverse, true
}

// trackFile reads a track_file block: its file (absolute: ipvsctl does not
// run from keepalived's directory), its weight and reverse.
func (k *kaImporter) trackFile(n *kaNode) (string, int, bool, error) {
	path, weight, reverse := "", 1, false
	for _, c := range n.children {
		switch c.word(0) {
		case "file":
			if len(c.words) < 2 {
				return "", 0, false, k.errf(c.line, "track file file name missing")
			}
			path = strings.Join(wordTexts(c.words[1:]), " ")
			if !strings.HasPrefix(path, "/") {
				return "", 0, false, k.errf(c.line, "track_file %s: file %q: want an absolute path (ipvsctl does not run in keepalived's directory)", n.word(1), path)
			}
		case "weight":
			if w, rev, ok := k.trackWeight(c, 254); ok {
				weight, reverse = w, rev
			}
		}
	}
	if path == "" {
		return "", 0, false, k.errf(n.line, "No file set for track_file %s", n.word(1))
	}
	return path, weight, reverse, nil
}
