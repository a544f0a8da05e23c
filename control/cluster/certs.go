package cluster

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft/atomicfile"
)

// The certificates a server holds (see control/pki's doc), and the files
// it keeps of them in its data directory for `isle certs check`:
//
//	pki/apiserver.crt               the API serving certificate (its key stays in memory)
//	pki/apiserver-node-client.crt   the API servers' client certificate to the streaming servers
//	pki/kubeconfigs.json            the kubeconfig files `isle kubeconfig -o` wrote, which the server renews
//
// Each is written when its certificate is issued: at start, and at renewal.
const (
	servingCertFile    = "pki/apiserver.crt"
	nodeClientCertFile = "pki/apiserver-node-client.crt"
	kubeconfigsFile    = "pki/kubeconfigs.json"
)

// startCerts issues the API servers' client certificate to the streaming
// servers, saves it and the serving certificate as they are issued,
// exports their expiry and the CA's as metrics, and renews them, and the
// kubeconfigs recorded in the data directory, until ctx ends.
func startCerts(ctx context.Context, cfg Config, serving *pki.Leaf, kick <-chan struct{}) (nodeClient *pki.Leaf, err error) {
	ca, log := cfg.Identity.CA, cfg.Logger
	nodeClient, err = ca.ClientLeaf(wire.APIServerUser, nil, cfg.Now)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	for name, l := range map[string]*pki.Leaf{servingCertFile: serving, nodeClientCertFile: nodeClient} {
		l.OnIssue(func(certPEM []byte) {
			if err := writeFile(cfg.DataDir, name, certPEM); err != nil {
				log.Warn("cluster: certificate not saved; isle certs check shows the one before", "err", err)
			}
		})
		go l.Run(ctx, log)
	}
	for kind, cert := range map[string]func() *x509.Certificate{
		wire.CertKindCA: ca.Cert, wire.CertKindServing: serving.Current, wire.CertKindNodeClient: nodeClient.Current,
	} {
		if err := cfg.Metrics.Register(expiryGauge(kind, cert)); err != nil {
			return nil, fmt.Errorf("cluster: certificate metrics: %w", err)
		}
	}
	go renewKubeconfigs(ctx, cfg.DataDir, ca, cfg.Now, kick, log)
	return nodeClient, nil
}

// expiryGauge is the wire.CertExpiryMetric gauge of the certificate of
// kind that cert returns.
func expiryGauge(kind string, cert func() *x509.Certificate) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: wire.CertExpiryMetric, Help: wire.CertExpiryHelp,
		ConstLabels: prometheus.Labels{"certificate": kind}},
		func() float64 { return time.Until(cert().NotAfter).Seconds() })
}

// kubeconfigRecord is kubeconfigsFile.
type kubeconfigRecord struct {
	Files []string `json:"files"` // absolute paths
}

func loadKubeconfigRecord(dir string) (kubeconfigRecord, error) {
	var rec kubeconfigRecord
	path := filepath.Join(dir, kubeconfigsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, nil
	}
	if err != nil {
		return rec, fmt.Errorf("kubeconfig record: %w", err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("kubeconfig record: %s: %w", path, err)
	}
	return rec, nil
}

// WriteAdminKubeconfig writes AdminKubeconfig's kubeconfig to path (0600,
// atomically) and records it in the data directory dir, whose server
// renews its client certificate from then on (renewKubeconfigs) as long as
// the file is as isle wrote it.
func WriteAdminKubeconfig(dir, server, path string, now time.Time) error {
	b, err := AdminKubeconfig(dir, server, now)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if err := atomicfile.Write(abs, b, fileMode); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	rec, err := loadKubeconfigRecord(dir)
	if err != nil {
		return fmt.Errorf("kubeconfig: written to %s, not recorded for renewal: %w", abs, err)
	}
	for _, f := range rec.Files {
		if f == abs {
			return nil
		}
	}
	rec.Files = append(rec.Files, abs)
	out, _ := json.Marshal(rec)
	if err := writeFile(dir, kubeconfigsFile, out); err != nil {
		return fmt.Errorf("kubeconfig: written to %s, not recorded for renewal: %w", abs, err)
	}
	return nil
}

// renewKubeconfigs renews the client certificates of the recorded
// kubeconfigs when due, and their CAs when the CA is replaced, looking
// every wire.MaxRenewalWait or a twentieth of the CA's leaf validity,
// whichever is shorter, and when kicked, until ctx ends.
func renewKubeconfigs(ctx context.Context, dir string, ca *pki.CA, now func() time.Time, kick <-chan struct{}, log *slog.Logger) {
	validity := ca.LeafValidity
	if validity <= 0 {
		validity = pki.LeafValidity
	}
	every := min(wire.MaxRenewalWait, validity/20)
	warned := map[string]bool{} // files not renewable, warned of once
	for {
		rec, err := loadKubeconfigRecord(dir)
		if err != nil {
			log.Warn("cluster: kubeconfigs not renewed", "err", err)
		}
		for _, path := range rec.Files {
			renewed, err := renewKubeconfig(path, ca, now())
			switch {
			case err != nil && !warned[path]:
				warned[path] = true
				log.Warn("cluster: kubeconfig not renewed; write a new one with isle kubeconfig -o", "file", path, "err", err)
			case renewed:
				delete(warned, path)
				log.Info("cluster: kubeconfig's client certificate renewed", "file", path)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		case <-kick:
		}
	}
}

// renewKubeconfig renews the kubeconfig file at path when its client
// certificate is due, keeping its mode and owner. A file removed since it
// was written is nothing to renew.
func renewKubeconfig(path string, ca *pki.CA, now time.Time) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	out, renewed, err := ca.RenewKubeconfig(b, now)
	if err != nil || !renewed {
		return false, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	if err := atomicfile.Write(path, out, fi.Mode().Perm()); err != nil {
		return false, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if err := os.Chown(path, int(st.Uid), int(st.Gid)); err != nil {
			return true, fmt.Errorf("renewed, owner not kept: %w", err)
		}
	}
	return true, nil
}

// CertFile is a certificate a data directory holds, or names, for `isle
// certs check`.
type CertFile struct {
	Kind string // wire.CertKindCA, ...
	Path string
	Cert *x509.Certificate // nil: Err says why
	Err  error
	// Edited is a kubeconfig changed since isle wrote it, whose
	// certificate the server does not renew.
	Edited bool
}

// ServerCertFiles are the certificates a server's data directory dir
// holds: the CA, the server's certificates as last issued, and the client
// certificates of the recorded kubeconfigs that still exist. A directory
// without a server's files has none.
func ServerCertFiles(dir string) []CertFile {
	var out []CertFile
	for _, f := range []struct{ kind, name string }{
		{wire.CertKindCA, caCertFile}, {wire.CertKindServing, servingCertFile}, {wire.CertKindNodeClient, nodeClientCertFile},
	} {
		path := filepath.Join(dir, f.name)
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		cf := CertFile{Kind: f.kind, Path: path, Err: err}
		if err == nil {
			cf.Cert, cf.Err = wire.ParseCertPEM(b)
		}
		out = append(out, cf)
	}
	rec, err := loadKubeconfigRecord(dir)
	if err != nil {
		out = append(out, CertFile{Kind: wire.CertKindKubeconfig, Path: filepath.Join(dir, kubeconfigsFile), Err: err})
	}
	for _, path := range rec.Files {
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		cf := CertFile{Kind: wire.CertKindKubeconfig, Path: path, Err: err}
		if err == nil {
			var renewable bool
			cf.Cert, renewable, cf.Err = pki.KubeconfigClientCert(b, adminUser)
			cf.Edited = cf.Err == nil && !renewable
		}
		out = append(out, cf)
	}
	return out
}
