package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/isle-cluster/isle/raft/atomicfile"
)

// CredentialFile, in a board's data directory, is what the board got when
// it joined (0600). It is rewritten only when the set of servers changes,
// so a settled board does not write to its SD card.
const CredentialFile = "node-credential.json"

// Credential is a joined board's identity and what it needs to rejoin the
// cluster after a reboot without the token.
type Credential struct {
	Name      string `json:"name"`
	NodeToken string `json:"nodeToken"` // bearer token for the Kubernetes API
	// CACert is the CAs the board trusts (PEM): the cluster CA, and while
	// it is replaced the new one too.
	CACert    []byte `json:"caCert"`
	GossipKey []byte `json:"gossipKey"`
	// Servers are the servers' gossip addresses (host:port) last seen:
	// where to rejoin the gossip after a reboot.
	Servers []string `json:"servers"`
}

// LoadCredential reads the credential of dataDir; ok is false when the
// board has not joined yet.
func LoadCredential(dataDir string) (c Credential, ok bool, err error) {
	path := filepath.Join(dataDir, CredentialFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("wire: read credential: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, false, fmt.Errorf("wire: %s: %w (remove it to join the board again)", path, err)
	}
	if err := c.Validate(); err != nil {
		return c, false, fmt.Errorf("wire: %s: %w (remove it to join the board again)", path, err)
	}
	return c, true, nil
}

// Validate checks that the credential has what a board needs.
func (c Credential) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("no name")
	case c.NodeToken == "":
		return errors.New("no node token")
	case len(c.GossipKey) != 32:
		return fmt.Errorf("gossip key of %d bytes, want 32", len(c.GossipKey))
	}
	if _, err := ParseCertsPEM(c.CACert); err != nil {
		return fmt.Errorf("CA certificates: %w", err)
	}
	return nil
}

// Save writes the credential atomically and durably.
func (c Credential) Save(dataDir string) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("wire: save credential: %w", err)
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	if err := atomicfile.Write(filepath.Join(dataDir, CredentialFile), b, 0o600); err != nil {
		return fmt.Errorf("wire: save credential: %w", err)
	}
	return nil
}

// maxServers bounds the saved server list.
const maxServers = 16

// WithServers returns c with the servers' addresses added to the saved
// ones, and whether that changed them. Addresses are kept after their
// server dies (the board may reboot while it is down, and trying a stale
// address costs only a timeout), up to maxServers.
func (c Credential) WithServers(addrs []string) (Credential, bool) {
	union := slices.Concat(c.Servers, addrs)
	slices.Sort(union)
	union = slices.Compact(union)
	if len(union) > maxServers {
		union = slices.Compact(slices.Sorted(slices.Values(addrs)))
	}
	if len(union) == 0 || slices.Equal(union, c.Servers) {
		return c, false
	}
	c.Servers = union
	return c, true
}
