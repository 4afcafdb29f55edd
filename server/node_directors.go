package server

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	"github.com/ipvsctl/ipvsctl/server/store"
	"github.com/ipvsctl/ipvsctl/server/trust"
)

// Replication modes (node set --replication).
const (
	// ReplicationPair is the two directors of a pair following each
	// other: the newer change wins (a backup takes the master's).
	ReplicationPair = "pair"
	// ReplicationSource is the director of N that edits are made on.
	ReplicationSource = "source"
	// ReplicationFollower takes the source's every revision and refuses
	// local edits.
	ReplicationFollower = "follower"
)

// setNodeDirectors applies the replication mode, the pair CA and the
// followers' pins of p to n.
func setNodeDirectors(n *store.Node, p NodePatch, detail *[]string) error {
	if p.Replication != nil {
		switch v := *p.Replication; v {
		case ReplicationPair, ReplicationSource, ReplicationFollower:
			n.Replication = v
		default:
			return errorf(CodeBadInput, "replication: %q is not pair, source or follower", v)
		}
		*detail = append(*detail, "replication "+n.Replication)
	}
	if p.PeerCA != nil {
		n.PeerCA = ""
		if v := strings.TrimSpace(*p.PeerCA); v != "" {
			if _, err := trust.ParseCA([]byte(v)); err != nil {
				return errorf(CodeBadInput, "peer_ca: %s", err.Error())
			}
			n.PeerCA = v + "\n"
		}
		*detail = append(*detail, "peer_ca "+map[bool]string{true: "set", false: "cleared"}[n.PeerCA != ""])
	}
	if p.FollowerFingerprints != nil {
		var fps []string
		for i, v := range *p.FollowerFingerprints {
			fp, err := trust.ParseFingerprint(v)
			if err != nil {
				return errorf(CodeBadInput, "follower_fingerprints[%d]: %s", i, err.Error())
			}
			if !slices.Contains(fps, fp) {
				fps = append(fps, fp)
			}
		}
		n.FollowerFingerprints = fps
		*detail = append(*detail, fmt.Sprintf("follower_fingerprints %d", len(fps)))
	}
	switch n.Replication {
	case ReplicationFollower:
		if n.PeerURL == "" {
			return errorf(CodeBadInput, "peer_url: a follower needs the source's URL (--peer-url https://SOURCE:3636)")
		}
	case ReplicationSource:
		if n.PeerURL != "" {
			return errorf(CodeBadInput, "peer_url: the source follows no one; clear peer_url (%s) or make this director a follower", n.PeerURL)
		}
	}
	return nil
}

// DirectorTrust is whom this director believes on the link between
// directors: its peer's or source's pin, its followers' pins, the pair CA.
func DirectorTrust(n store.Node) (trust.Directors, error) {
	var d trust.Directors
	if n.PeerFingerprint != "" {
		d.Pins = append(d.Pins, n.PeerFingerprint)
	}
	d.Pins = append(d.Pins, n.FollowerFingerprints...)
	if n.PeerCA != "" {
		pool, err := trust.ParseCA([]byte(n.PeerCA))
		if err != nil {
			return d, fmt.Errorf("node peer_ca: %w", err)
		}
		d.CA = pool
	}
	return d, nil
}

// Directors is DirectorTrust of the stored node settings.
func (c *Core) Directors(ctx context.Context) (trust.Directors, error) {
	n, err := c.store.Node(ctx)
	if err != nil {
		return trust.Directors{}, err
	}
	return DirectorTrust(n)
}

// caSubjects names the pair CA's certificates, for node show.
func caSubjects(pemText string) string {
	var names []string
	rest := []byte(pemText)
	for {
		c, r, ok := nextCert(rest)
		if !ok {
			break
		}
		rest = r
		names = append(names, c.Subject.String())
	}
	return strings.Join(names, "; ")
}

func nextCert(b []byte) (*x509.Certificate, []byte, bool) {
	c, err := trust.Leaf(b)
	if err != nil {
		return nil, nil, false
	}
	i := strings.Index(string(b), "-----END CERTIFICATE-----")
	if i < 0 {
		return nil, nil, false
	}
	return c, b[i+len("-----END CERTIFICATE-----"):], true
}

// refuseOnFollower refuses a local change on a follower: edits are made on
// the source, whose every revision reaches this director.
func (c *Core) refuseOnFollower(a Actor) error {
	if strings.HasPrefix(a.Name, ReplicatedAuthor) {
		return nil
	}
	n, err := c.store.Node(context.Background())
	if err != nil || n.Replication != ReplicationFollower {
		return nil
	}
	return errorf(CodeBackup, "this director follows the source %s: make the change there; it reaches this one within a second (node set --replication source makes this one a source)", n.PeerURL)
}

// PeerDial is how replication reaches the director it follows: its URL,
// the token it presents (the role check there), and whom it believes
// there (the peer's pin and the pair CA; the followers' pins are for
// calls to this director, not from it).
type PeerDial struct {
	URL, Token string
	Trust      trust.Directors
}

// PeerDialOf is how the node settings n reach the director they follow.
func PeerDialOf(n store.Node) PeerDial {
	d := PeerDial{URL: n.PeerURL, Token: n.PeerToken}
	if n.PeerFingerprint != "" {
		d.Trust.Pins = []string{n.PeerFingerprint}
	}
	if n.PeerCA != "" {
		d.Trust.CA, _ = trust.ParseCA([]byte(n.PeerCA)) // checked by node set
	}
	return d
}

// FollowerReport is what a following director tells the one it follows
// with each poll: the hash it last agreed on, and its last error.
type FollowerReport struct {
	Hash, Error string
	Node        string // its node address
}
