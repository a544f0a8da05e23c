package wire

import (
	"time"

	"github.com/isle-cluster/isle/raft"
)

// Role is what a board is in the cluster.
type Role string

// The roles of a board.
const (
	RoleServer Role = "server" // store member and API server (and a node)
	RoleAgent  Role = "agent"  // a node only
)

// JoinPath is the join endpoint.
const JoinPath = "/isle/v1/join"

// CredentialHeader carries a rejoining board's node credential.
const CredentialHeader = "X-Isle-Node-Credential"

// JoinRequest asks to add a board.
type JoinRequest struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
	// Release is the joiner's isle release (Release); servers refuse
	// what the version skew policy does not allow (CheckSkew).
	Release string `json:"release,omitempty"`
	// Servers only: where the new store member is reached.
	RaftAddr string `json:"raftAddr,omitempty"`
	APIAddr  string `json:"apiAddr,omitempty"`
}

// JoinResponse is what a joined board needs.
type JoinResponse struct {
	CACert []byte `json:"caCert"`
	// NodeToken is the board's new node credential (a bearer token for the
	// Kubernetes API); empty when the board proved it already has one.
	NodeToken string `json:"nodeToken,omitempty"`
	// GossipKey encrypts the cluster's gossip. Agents keep it instead of
	// the token, whose secret also unseals the CA key.
	GossipKey []byte `json:"gossipKey"`
	// Servers only: the CA key sealed with the token's secret, and how to
	// start the new store member.
	CAKeySealed []byte         `json:"caKeySealed,omitempty"`
	Join        *raft.JoinInfo `json:"join,omitempty"`
	// RaftTLS tells a new server that every store member speaks TLS: it
	// takes no plain Raft connection from its first start.
	RaftTLS bool `json:"raftTLS,omitempty"`
}

// MembersPath lists the cluster's boards (GET) and removes one (DELETE
// MembersPath/NAME); authenticated by the token's secret like JoinPath.
const MembersPath = "/isle/v1/members"

// MemberInfo is one board in `isle member list`.
type MemberInfo struct {
	Name    string    `json:"name"`
	Role    Role      `json:"role"`
	State   string    `json:"state"` // as the answering server's gossip sees it; "" if unseen
	Since   time.Time `json:"since,omitzero"`
	Address string    `json:"address,omitempty"`
	Arch    string    `json:"arch,omitempty"`
	Version string    `json:"version,omitempty"`
	// Servers: the store member's ID and standing.
	RaftID string `json:"raftID,omitempty"`
	Raft   string `json:"raft,omitempty"` // leader, voter or learner
}
