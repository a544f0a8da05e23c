package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/control/wire"
)

// caTrust is the CAs the board trusts: its credential's bundle, which
// the servers change while the agent runs when the cluster CA is replaced
// (`isle certs rotate-ca`): first the new CA beside the old, then the new
// one alone. Safe for concurrent use.
type caTrust struct {
	mu    sync.RWMutex
	pem   []byte
	certs []*x509.Certificate
	pool  *x509.CertPool
}

func newCATrust(bundle []byte) (*caTrust, error) {
	t := &caTrust{}
	if _, err := t.set(bundle); err != nil {
		return nil, err
	}
	return t, nil
}

// set trusts the CAs of bundle from now on; changed is false when they
// are the ones trusted already.
func (t *caTrust) set(bundle []byte) (changed bool, err error) {
	certs, err := wire.ParseCertsPEM(bundle)
	if err != nil {
		return false, fmt.Errorf("agent: the CAs to trust: %w", err)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		if !c.IsCA {
			return false, fmt.Errorf("agent: the CAs to trust: %q is not a CA", c.Subject.CommonName)
		}
		pool.AddCert(c)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if bytes.Equal(t.pem, bundle) {
		return false, nil
	}
	t.pem, t.certs, t.pool = bytes.Clone(bundle), certs, pool
	return true, nil
}

// Pool is the CAs trusted now.
func (t *caTrust) Pool() *x509.CertPool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.pool
}

// hashes are the CAHash of each CA trusted, comma separated
// (wire.AnnotationCATrust).
func (t *caTrust) hashes() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return strings.Join(wire.CAHashes(t.certs), ",")
}

// issuer is the CAHash of the trusted CA that signed cert, "" if none.
func (t *caTrust) issuer(cert *x509.Certificate) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, c := range t.certs {
		if cert.CheckSignatureFrom(c) == nil {
			return wire.CAHash(c)
		}
	}
	return ""
}

// clientConfig verifies the servers by the CAs trusted at each handshake,
// at the board's time now.
func (t *caTrust) clientConfig(serverName string, now func() time.Time) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		Time:       now,
		// The standard verification takes a fixed pool; VerifyConnection
		// does the same with the pool of the moment.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return wire.VerifyServer(cs, t.Pool(), now)
		},
	}
}

// followCA asks the servers which CAs to trust every wire.CAPollEvery
// until ctx ends: a new bundle is trusted at once and saved in the
// credential, a streaming certificate of a CA that no longer signs is
// renewed, and the Node's annotations tell the leader where the board
// stands (wire.AnnotationCATrust, wire.AnnotationCAIssuer).
func (a *Agent) followCA(ctx context.Context, name string, stream *streamServer) {
	reported := map[string]string{}
	for {
		if err := a.checkCA(ctx, name, stream, reported); err != nil && ctx.Err() == nil {
			a.log.Debug("agent: CAs to trust not checked", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wire.CAPollEvery):
		}
	}
}

func (a *Agent) checkCA(ctx context.Context, name string, stream *streamServer, reported map[string]string) error {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := a.client.Get().AbsPath(wire.CAPath).Do(rctx).Raw()
	if err != nil {
		return fmt.Errorf("GET %s: %w", wire.CAPath, err)
	}
	var info wire.CAInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return fmt.Errorf("GET %s: %w", wire.CAPath, err)
	}
	changed, err := a.trust.set(info.Bundle)
	if err != nil {
		return err
	}
	if changed {
		a.log.Info("agent: the cluster's CAs changed; trusting them", "cas", a.trust.hashes())
		if err := a.saveCredential(func(c *wire.Credential) { c.CACert = info.Bundle }); err != nil {
			a.log.Warn("agent: the CAs to trust not saved; the board trusts them until it restarts", "err", err)
		}
	}
	if stream != nil {
		if c := stream.cert.Load(); c != nil && a.trust.issuer(c.Leaf) != info.Signer {
			if err := stream.renewNow(ctx); err != nil {
				return fmt.Errorf("streaming certificate of the new CA: %w", err)
			}
		}
	}
	want := map[string]string{wire.AnnotationCATrust: a.trust.hashes()}
	if stream != nil {
		if c := stream.cert.Load(); c != nil {
			want[wire.AnnotationCAIssuer] = a.trust.issuer(c.Leaf)
		}
	} else {
		// No streaming server: nothing the old CA signed.
		want[wire.AnnotationCAIssuer] = info.Signer
	}
	same := true
	for k, v := range want {
		same = same && reported[k] == v
	}
	if same {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": want}})
	if err := a.client.Patch(types.MergePatchType).Resource("nodes").Name(name).Body(patch).Do(rctx).Error(); err != nil {
		return fmt.Errorf("annotate the Node: %w", err)
	}
	for k, v := range want {
		reported[k] = v
	}
	return nil
}

// saveCredential changes the credential with change and saves it.
func (a *Agent) saveCredential(change func(*wire.Credential)) error {
	a.credMu.Lock()
	defer a.credMu.Unlock()
	cred := a.saved
	change(&cred)
	if err := cred.Save(a.cfg.DataDir); err != nil {
		return err
	}
	a.saved = cred
	return nil
}
