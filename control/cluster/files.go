package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/atomicfile"
)

// The files a server keeps in its data directory besides the store:
//
//	token               the server token (0600): it decrypts the CA key
//	token.next          while the server token is replaced, the new one (servertoken.go)
//	pki/ca.crt          the cluster CA certificate
//	pki/ca.key.sealed   the CA key, sealed with the token's secret
//	pki/ca-next.*       while the CA is replaced, the new one (carotation.go)
//	cluster.json        this server's API address and certificates' validity, for `isle kubeconfig`
//	agent-token         the first agent token, on the server that started the cluster (agenttokens.go)
//	raft-tls            present once the store's links are TLS alone (rafttls.go)
const (
	tokenFile       = "token"
	caCertFile      = "pki/ca.crt"
	caKeySealed     = "pki/ca.key.sealed"
	caNextCertFile  = "pki/ca-next.crt"
	caNextKeySealed = "pki/ca-next.key.sealed"
	clusterFile     = "cluster.json"
	storeDirName    = "store"
	fileMode        = 0o600
	directoryMode   = 0o700
)

// Identity is what a server needs to prove and to trust: the token and
// the CA (with its key).
type Identity struct {
	Token wire.Token
	CA    *pki.CA
	// live, once the server runs, holds the server token as it is now:
	// isle token rotate --server replaces it (servertoken.go).
	live *atomic.Pointer[wire.Token]
}

// token is the server token now.
func (id Identity) token() wire.Token {
	if id.live != nil {
		if t := id.live.Load(); t != nil {
			return *t
		}
	}
	return id.Token
}

// secret is the server token's secret now.
func (id Identity) secret() string { return id.token().Secret }

// localInfo is cluster.json.
type localInfo struct {
	APIServer string `json:"apiServer"` // https://host:port
	// LeafValidity is Config.LeafValidity, if set: `isle kubeconfig`
	// issues certificates as the server does.
	LeafValidity time.Duration `json:"leafValidity,omitempty"`
}

func writeFile(dir, name string, data []byte) error {
	return atomicfile.Write(filepath.Join(dir, name), data, fileMode)
}

// saveIdentity writes the token and the CA (key sealed) to dir.
func saveIdentity(dir string, id Identity) error {
	sealed, err := pki.Seal(id.CA.Signer().KeyPEM, id.Token.Secret, pki.InfoCAKey)
	if err != nil {
		return fmt.Errorf("save identity: %w", err)
	}
	// The key first, the token last, as carotation.go writes them.
	for _, f := range []struct {
		name string
		data []byte
	}{{caKeySealed, sealed}, {caCertFile, id.CA.CertPEM()}, {tokenFile, []byte(id.Token.String() + "\n")}} {
		if err := writeFile(dir, f.name, f.data); err != nil {
			return fmt.Errorf("save identity: %w", err)
		}
	}
	return nil
}

// LoadIdentity reads the token and the CA from a server's data directory.
func LoadIdentity(dir string) (Identity, error) {
	var id Identity
	tb, err := os.ReadFile(filepath.Join(dir, tokenFile))
	if err != nil {
		return id, fmt.Errorf("load identity: %w (is %s the data directory of an isle server?)", err, dir)
	}
	if id.Token, err = wire.ParseToken(strings.TrimSpace(string(tb))); err != nil {
		return id, fmt.Errorf("load identity: %s: %w", filepath.Join(dir, tokenFile), err)
	}
	if id.CA, err = loadCA(dir, id.Token); err != nil {
		// A crash while the server token was replaced (saveServerToken)
		// left the CA key sealed with the next token's secret.
		next, nerr := loadNextToken(dir)
		if nerr != nil {
			return id, fmt.Errorf("load identity: %w", err)
		}
		if id.CA, nerr = loadCA(dir, next); nerr != nil {
			return id, fmt.Errorf("load identity: %w", err)
		}
		id.Token = next
		if err := writeFile(dir, tokenFile, []byte(next.String()+"\n")); err != nil {
			return id, fmt.Errorf("load identity: finish the server token's replacement: %w", err)
		}
	}
	_ = os.Remove(filepath.Join(dir, tokenNextFile))
	if h := wire.CAHash(id.CA.Cert()); h != id.Token.CAHash {
		// The CA was replaced and the server stopped before it rewrote
		// the token: the token's secret opens the CA's key, which is
		// proof enough that they belong together.
		id.Token.CAHash = h
		if err := writeFile(dir, tokenFile, []byte(id.Token.String()+"\n")); err != nil {
			return id, fmt.Errorf("load identity: the CA was replaced; rewrite the token: %w", err)
		}
		removeNextCA(dir)
	}
	return id, nil
}

// loadNextToken reads the token a replacement of the server token was
// writing.
func loadNextToken(dir string) (wire.Token, error) {
	b, err := os.ReadFile(filepath.Join(dir, tokenNextFile))
	if err != nil {
		return wire.Token{}, err
	}
	return wire.ParseToken(strings.TrimSpace(string(b)))
}

// loadCA reads the CA of dir, its key opened with tok's secret. After a
// crash while the CA was replaced (carotation.go writes the key, then the
// certificate, then the token) it pairs them from the current and the
// next CA's files.
func loadCA(dir string, tok wire.Token) (*pki.CA, error) {
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
	certPEM, err := read(caCertFile)
	if err != nil {
		return nil, err
	}
	sealed, err := read(caKeySealed)
	if err != nil {
		return nil, err
	}
	keyPEM, err := pki.Open(sealed, tok.Secret, pki.InfoCAKey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (the token file does not belong to this CA key)", filepath.Join(dir, caKeySealed), err)
	}
	ca, err := pki.ParseCA(certPEM, keyPEM)
	if err == nil {
		return ca, nil
	}
	if next, nerr := read(caNextCertFile); nerr == nil {
		if ca, nerr := pki.ParseCA(next, keyPEM); nerr == nil {
			return ca, writeFile(dir, caCertFile, next)
		}
	}
	return nil, err
}

// removeNextCA removes the files of a CA replacement that is over.
func removeNextCA(dir string) {
	for _, name := range []string{caNextCertFile, caNextKeySealed} {
		_ = os.Remove(filepath.Join(dir, name))
	}
}

// HasServer reports whether a data directory holds a server already: one
// that restarts, with the identity its directory keeps.
func HasServer(dir string) bool { return raft.HasMember(filepath.Join(dir, storeDirName)) }

// NewIdentity makes a new cluster's CA and token and saves them to dir.
func NewIdentity(dir string, now time.Time) (Identity, error) {
	ca, err := pki.NewCA("isle-ca", now)
	if err != nil {
		return Identity{}, fmt.Errorf("new CA: %w", err)
	}
	tok, err := wire.NewToken(ca.Cert())
	if err != nil {
		return Identity{}, fmt.Errorf("new CA: %w", err)
	}
	id := Identity{Token: tok, CA: ca}
	return id, saveIdentity(dir, id)
}

// JoinedIdentity is the identity a server that joined the cluster of tok
// was answered with (the CA, its key sealed with the token's secret); it
// saves it to dir.
func JoinedIdentity(dir string, tok wire.Token, resp wire.JoinResponse) (Identity, error) {
	keyPEM, err := pki.Open(resp.CAKeySealed, tok.Secret, pki.InfoCAKey)
	if err != nil {
		return Identity{}, fmt.Errorf("join: %w", err)
	}
	ca, err := pki.ParseCA(resp.CACert, keyPEM)
	if err != nil {
		return Identity{}, fmt.Errorf("join: %w", err)
	}
	id := Identity{Token: tok, CA: ca}
	if resp.RaftTLS {
		if err := writeFile(dir, raftTLSFile, []byte("every store member speaks TLS\n")); err != nil {
			return id, fmt.Errorf("join: %w", err)
		}
	}
	return id, saveIdentity(dir, id)
}

func saveLocalInfo(dir string, info localInfo) error {
	b, _ := json.Marshal(info)
	return writeFile(dir, clusterFile, b)
}

// LocalAPIServer returns the API server URL recorded in a data directory.
func LocalAPIServer(dir string) (string, error) {
	info, err := loadLocalInfo(dir)
	return info.APIServer, err
}

func loadLocalInfo(dir string) (localInfo, error) {
	var info localInfo
	b, err := os.ReadFile(filepath.Join(dir, clusterFile))
	if err != nil {
		return info, fmt.Errorf("read %s: %w", filepath.Join(dir, clusterFile), err)
	}
	if err := json.Unmarshal(b, &info); err != nil || info.APIServer == "" {
		return info, fmt.Errorf("read %s: damaged", filepath.Join(dir, clusterFile))
	}
	return info, nil
}

// adminUser is the administrators' user in kubeconfigs (group
// system:masters).
const adminUser = "isle-admin"

// AdminKubeconfig issues an administrator's client certificate from the
// CA in dir, valid as long as the server's, and returns a kubeconfig for
// server (empty: the one the server recorded).
func AdminKubeconfig(dir, server string, now time.Time) ([]byte, error) {
	id, err := LoadIdentity(dir)
	if err != nil {
		return nil, err
	}
	info, err := loadLocalInfo(dir)
	switch {
	case err == nil:
		id.CA.LeafValidity = info.LeafValidity
	case server == "":
		return nil, err
	}
	if server == "" {
		server = info.APIServer
	}
	certPEM, keyPEM, err := id.CA.IssueClient(adminUser, []string{"system:masters"}, now)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return pki.Kubeconfig("isle", server, id.CA.CertPEM(), adminUser, certPEM, keyPEM, "")
}
