package server

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/ipvsctl/ipvsctl/server/store"
	"github.com/ipvsctl/ipvsctl/server/trust"
)

// NodeSettings are this director's own part in a redundant pair, kept
// outside the replicated revisions: the pair shares settings.redundancy,
// and each director has its own priority.
type NodeSettings struct {
	// Priority is the VRRP priority, 1..255 (default 100).
	Priority int `json:"priority"`
	// Role is auto (VRRP elects), master (priority 255, the address owner:
	// it takes over at once) or backup (never carries the VIPs).
	Role string `json:"role"`
	// PeerURL is the other director's API, which the desired state is
	// replicated from while this one is backup ("" for none).
	PeerURL string `json:"peer_url"`
	// PeerTokenSet says a token for the peer is kept (it is never shown).
	PeerTokenSet bool `json:"peer_token_set"`
	// Address is this director's own address among settings.redundancy.unicast_peers
	// ("": found from its interfaces).
	Address   string     `json:"address"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
	// PeerFingerprint is the SHA-256 fingerprint the peer's certificate
	// must have (an https:// peer is believed on it alone).
	PeerFingerprint string `json:"peer_fingerprint"`
	// AllowReplicatedExec lets replication bring exec checks (programs run
	// as root) onto this director; off, such a document is refused.
	AllowReplicatedExec bool `json:"allow_replicated_exec"`
	// Fingerprint is this director's own certificate's, to give the peer
	// ("" while it has none, FingerprintError says why). IdentityCert is
	// that certificate's file and IdentityFrom how it is known: serve (the
	// daemon serves it), last serve (serve last started with it) or
	// self-signed (serve has not started yet: the one it makes unless
	// given --tls-cert).
	Fingerprint      string `json:"fingerprint"`
	IdentityCert     string `json:"identity_cert,omitempty"`
	IdentityFrom     string `json:"identity_from,omitempty"`
	FingerprintError string `json:"fingerprint_error,omitempty"`
	// RouterID and BGPSource are this director's BGP router ID and the
	// address its sessions come from, in BGP mode ("": the defaults);
	// Drained says node drain took it out.
	RouterID  string `json:"router_id"`
	BGPSource string `json:"bgp_source"`
	Drained   bool   `json:"drained"`
	// Replication is pair, source or follower (node_directors.go); PeerCA
	// names the pair CA's certificates ("" for none); FollowerFingerprints
	// are the directors that may follow this one.
	Replication          string   `json:"replication"`
	PeerCA               string   `json:"peer_ca,omitempty"`
	FollowerFingerprints []string `json:"follower_fingerprints,omitempty"`
}

// NodePatch changes the node settings that are set.
type NodePatch struct {
	Priority  *int    `json:"priority,omitempty"`
	Role      *string `json:"role,omitempty"`
	PeerURL   *string `json:"peer_url,omitempty"`
	PeerToken *string `json:"peer_token,omitempty"`
	Address   *string `json:"address,omitempty"`
	// PeerFingerprint: see NodeSettings.
	PeerFingerprint     *string `json:"peer_fingerprint,omitempty"`
	AllowReplicatedExec *bool   `json:"allow_replicated_exec,omitempty"`
	RouterID            *string `json:"router_id,omitempty"`
	BGPSource           *string `json:"bgp_source,omitempty"`
	Drained             *bool   `json:"drained,omitempty"`
	// Replication, PeerCA (PEM text, "" to clear) and FollowerFingerprints:
	// see NodeSettings.
	Replication          *string   `json:"replication,omitempty"`
	PeerCA               *string   `json:"peer_ca,omitempty"`
	FollowerFingerprints *[]string `json:"follower_fingerprints,omitempty"`
}

// NodeView is the node settings with what the director's redundancy is
// doing now (nil without a daemon or without settings.redundancy).
type NodeView struct {
	NodeSettings
	Redundancy *RedundancyStatus `json:"redundancy,omitempty"`
	// BGP is what the BGP speaker does now (nil without a daemon or
	// without settings.bgp).
	BGP *BGPStatus `json:"bgp,omitempty"`
}

func nodeSettings(n store.Node) NodeSettings {
	s := NodeSettings{Priority: n.Priority, Role: n.Role, PeerURL: n.PeerURL, PeerTokenSet: n.PeerToken != "", Address: n.Address,
		PeerFingerprint: n.PeerFingerprint, AllowReplicatedExec: n.AllowReplicatedExec,
		RouterID: n.RouterID, BGPSource: n.BGPSource, Drained: n.BGPDrained,
		Replication: n.Replication, PeerCA: caSubjects(n.PeerCA), FollowerFingerprints: n.FollowerFingerprints}
	if !n.UpdatedAt.IsZero() {
		at := n.UpdatedAt
		s.UpdatedAt = &at
	}
	return s
}

// NodeSettings returns this director's node settings and its redundancy status.
func (c *Core) NodeSettings(ctx context.Context) (*NodeView, error) {
	n, err := c.store.Node(ctx)
	if err != nil {
		return nil, err
	}
	return c.nodeView(n), nil
}

func (c *Core) nodeView(n store.Node) *NodeView {
	v := &NodeView{NodeSettings: nodeSettings(n), Redundancy: c.redundancyStatus(), BGP: c.bgpStatus()}
	v.Fingerprint, v.IdentityCert, v.IdentityFrom, v.FingerprintError = c.identityFingerprint(n)
	return v
}

// Where the certificate whose fingerprint node show prints comes from.
const (
	// IdentityServed: the certificate this process serves (the daemon).
	IdentityServed = "serve"
	// IdentityLastServe: the one serve last started with, as it recorded.
	IdentityLastServe = "last serve"
	// IdentitySelfSigned: serve has never started on this database; the
	// self-signed one beside it is what serve shows unless given --tls-cert.
	IdentitySelfSigned = "self-signed"
)

// identityFingerprint is the fingerprint of the certificate this director
// shows its peers: the one this process serves, else the one serve last
// started with, else the self-signed one beside the database. errText says
// why the fingerprint is "" when it is.
func (c *Core) identityFingerprint(n store.Node) (fp, path, from, errText string) {
	path, from = c.identity, IdentityServed
	if path == "" {
		path, from = n.IdentityCert, IdentityLastServe
	}
	if path == "" && c.store.Path() != "" {
		path, _ = trust.IdentityPaths(filepath.Dir(c.store.Path()))
		from = IdentitySelfSigned
	}
	if path == "" {
		return "", "", "", "no certificate: this director has no database directory"
	}
	fp, err := trust.CertFingerprint(path)
	if err != nil {
		return "", path, from, err.Error()
	}
	return fp, path, from, ""
}

// fingerprint is the fingerprint of the certificate this process serves
// (its --tls-cert, else the self-signed one), "" when it cannot be read.
func (c *Core) fingerprint() string {
	fp, _, _, _ := c.identityFingerprint(store.Node{})
	return fp
}

// recordIdentity stores the certificate this process serves.
func (c *Core) recordIdentity(ctx context.Context) error {
	if c.identity == "" {
		return nil
	}
	path, err := filepath.Abs(c.identity)
	if err != nil {
		return fmt.Errorf("record serve's certificate %s: %w", c.identity, err)
	}
	return c.store.SaveIdentityCert(ctx, path)
}

// SetNode changes this director's node settings; a running daemon takes
// them up at once (a new priority reaches the running VRRP instance, a new
// role restarts it, which resigns first when it was master).
func (c *Core) SetNode(ctx context.Context, a Actor, p NodePatch) (view *NodeView, err error) {
	var detail []string
	defer func() {
		e := store.AuditEntry{Actor: a.Name, Via: a.Via, ClientAddr: a.Addr, Action: "node set", Target: "node",
			Outcome: store.OutcomeSuccess, Detail: strings.Join(detail, ", ")}
		if err != nil {
			e.Outcome, e.Detail = store.OutcomeFailure, err.Error()
		}
		if _, werr := c.store.WriteAudit(context.WithoutCancel(ctx), e); werr != nil {
			c.log.Error("audit record lost", "action", "node set", "actor", a.Name, "err", werr)
		}
	}()
	n, err := c.store.Node(ctx)
	if err != nil {
		return nil, err
	}
	if err := setNodeVRRP(&n, p, &detail); err != nil {
		return nil, err
	}
	if err := setNodePeer(&n, p, &detail); err != nil {
		return nil, err
	}
	if err := setNodeDirectors(&n, p, &detail); err != nil {
		return nil, err
	}
	if strings.HasPrefix(n.PeerURL, "https://") && n.PeerFingerprint == "" && n.PeerCA == "" {
		return nil, errorf(CodeBadInput, "peer_fingerprint: the https:// peer %s needs its certificate's fingerprint (ipvsctl node show on the peer prints it) or a pair CA (--peer-ca): no system root is trusted", n.PeerURL)
	}
	if err := setNodeOwn(&n, p, &detail); err != nil {
		return nil, err
	}
	if err := setNodeBGP(&n, p, &detail); err != nil {
		return nil, err
	}
	n.UpdatedAt = c.now()
	if err := c.store.SaveNode(ctx, n); err != nil {
		return nil, err
	}
	c.red.nodeChanged()
	c.bgpNodeChanged()
	return c.nodeView(n), nil
}

// setNodeVRRP applies the VRRP priority and role of a node patch.
func setNodeVRRP(n *store.Node, p NodePatch, detail *[]string) error {
	if p.Priority != nil {
		if *p.Priority < 1 || *p.Priority > 255 {
			return errorf(CodeBadInput, "priority: %d is out of range 1..255 (255 makes this director the address owner)", *p.Priority)
		}
		n.Priority = *p.Priority
		*detail = append(*detail, fmt.Sprintf("priority %d", n.Priority))
	}
	if p.Role != nil {
		switch *p.Role {
		case "auto", "master", "backup":
		default:
			return errorf(CodeBadInput, "role: %q is not auto, master or backup", *p.Role)
		}
		n.Role = *p.Role
		*detail = append(*detail, "role "+n.Role)
	}
	return nil
}

// setNodePeer applies the peer's URL and certificate fingerprint of a node patch.
func setNodePeer(n *store.Node, p NodePatch, detail *[]string) error {
	if p.PeerURL != nil {
		if v := *p.PeerURL; v != "" {
			if err := trust.CheckPeerURL(v); err != nil {
				return errorf(CodeBadInput, "peer_url: %s", err.Error())
			}
		}
		n.PeerURL = strings.TrimRight(*p.PeerURL, "/")
		*detail = append(*detail, "peer_url "+orDefault(n.PeerURL, `""`))
	}
	if p.PeerFingerprint != nil {
		n.PeerFingerprint = ""
		if v := *p.PeerFingerprint; v != "" {
			fp, err := trust.ParseFingerprint(v)
			if err != nil {
				return errorf(CodeBadInput, "peer_fingerprint: %s", err.Error())
			}
			n.PeerFingerprint = fp
		}
		*detail = append(*detail, "peer_fingerprint "+orDefault(n.PeerFingerprint, `""`))
	}
	return nil
}

// setNodeOwn applies what a node patch says of this director itself: whether
// it runs replicated exec checks, its token at the peer, its own address.
func setNodeOwn(n *store.Node, p NodePatch, detail *[]string) error {
	if p.AllowReplicatedExec != nil {
		n.AllowReplicatedExec = *p.AllowReplicatedExec
		*detail = append(*detail, fmt.Sprintf("allow_replicated_exec %v", n.AllowReplicatedExec))
	}
	if p.PeerToken != nil {
		n.PeerToken = *p.PeerToken
		*detail = append(*detail, "peer_token "+map[bool]string{true: "set", false: "cleared"}[n.PeerToken != ""])
	}
	if p.Address != nil {
		if v := *p.Address; v != "" {
			if _, err := netip.ParseAddr(v); err != nil {
				return errorf(CodeBadInput, "address: %q is not an IP address", v)
			}
		}
		n.Address = *p.Address
		*detail = append(*detail, "address "+orDefault(n.Address, `""`))
	}
	return nil
}
