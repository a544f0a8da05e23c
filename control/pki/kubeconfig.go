package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/isle-cluster/isle/control/wire"
)

// The kubeconfig schema (client-go's clientcmd/api/v1), reduced to the
// fields Kubeconfig writes. []byte fields marshal as base64, as kubeconfig
// "-data" fields are.
type (
	kubeconfig struct {
		APIVersion     string         `json:"apiVersion"`
		Kind           string         `json:"kind"`
		Clusters       []namedCluster `json:"clusters"`
		Users          []namedUser    `json:"users"`
		Contexts       []namedContext `json:"contexts"`
		CurrentContext string         `json:"current-context"`
		Preferences    struct{}       `json:"preferences"`
	}
	namedCluster struct {
		Name    string      `json:"name"`
		Cluster clusterInfo `json:"cluster"`
	}
	clusterInfo struct {
		Server                   string `json:"server"`
		CertificateAuthorityData []byte `json:"certificate-authority-data"`
	}
	namedUser struct {
		Name string   `json:"name"`
		User authInfo `json:"user"`
	}
	authInfo struct {
		ClientCertificateData []byte `json:"client-certificate-data,omitempty"`
		ClientKeyData         []byte `json:"client-key-data,omitempty"`
		Token                 string `json:"token,omitempty"`
	}
	namedContext struct {
		Name    string      `json:"name"`
		Context contextInfo `json:"context"`
	}
	contextInfo struct {
		Cluster string `json:"cluster"`
		User    string `json:"user"`
	}
)

// Kubeconfig returns a kubeconfig (YAML) with one cluster, one user and one
// context named "<user>@<cluster>", which is the current context. The
// cluster entry embeds caPEM; the user authenticates either with a client
// certificate (certPEM and keyPEM, token empty) or with a bearer token
// (token, certPEM and keyPEM empty). server must be an https URL.
func Kubeconfig(cluster, server string, caPEM []byte, user string, certPEM, keyPEM []byte, token string) ([]byte, error) {
	return KubeconfigIn(cluster, server, caPEM, user, certPEM, keyPEM, token, "")
}

// KubeconfigIn is Kubeconfig with namespace as its context's namespace.
func KubeconfigIn(cluster, server string, caPEM []byte, user string, certPEM, keyPEM []byte, token, namespace string) ([]byte, error) {
	if err := checkKubeconfigArgs(cluster, server, caPEM, user, certPEM, keyPEM, token); err != nil {
		return nil, fmt.Errorf("pki: kubeconfig: %w", err)
	}
	ctx := user + "@" + cluster
	cfg := kubeconfig{
		APIVersion: "v1",
		Kind:       "Config",
		Clusters: []namedCluster{{Name: cluster, Cluster: clusterInfo{
			Server: server, CertificateAuthorityData: caPEM,
		}}},
		Users: []namedUser{{Name: user, User: authInfo{
			ClientCertificateData: certPEM, ClientKeyData: keyPEM, Token: token,
		}}},
		Contexts:       []namedContext{{Name: ctx, Context: contextInfo{Cluster: cluster, User: user}}},
		CurrentContext: ctx,
	}
	var doc any = cfg
	if namespace != "" {
		// A context with a namespace is one RenewKubeconfig leaves alone
		// (its strict form has none).
		b, err := json.Marshal(cfg)
		if err != nil {
			return nil, fmt.Errorf("pki: kubeconfig: marshal: %w", err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("pki: kubeconfig: %w", err)
		}
		m["contexts"].([]any)[0].(map[string]any)["context"].(map[string]any)["namespace"] = namespace
		doc = m
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("pki: kubeconfig: marshal: %w", err)
	}
	return out, nil
}

func checkKubeconfigArgs(cluster, server string, caPEM []byte, user string, certPEM, keyPEM []byte, token string) error {
	switch {
	case cluster == "":
		return errors.New("empty cluster name")
	case user == "":
		return errors.New("empty user name")
	}
	u, err := url.Parse(server)
	if err != nil {
		return fmt.Errorf("server URL: %w", err)
	}
	if u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("server URL %q: want https://host[:port]", server)
	}
	if _, err := wire.ParseCertPEM(caPEM); err != nil {
		return fmt.Errorf("CA %w", err)
	}
	hasCert := len(certPEM) > 0 || len(keyPEM) > 0
	switch {
	case hasCert && token != "":
		return errors.New("both a client certificate and a token given; want one")
	case !hasCert && token == "":
		return errors.New("neither a client certificate nor a token given; want one")
	case hasCert && (len(certPEM) == 0 || len(keyPEM) == 0):
		return errors.New("client certificate and key must be given together")
	case hasCert:
		if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
			return fmt.Errorf("client certificate and key: %w", err)
		}
	}
	return nil
}

// parseKubeconfig parses a kubeconfig as Kubeconfig writes it, and no
// other: one user, with a client certificate, and no field Kubeconfig does
// not write (a kubeconfig someone edited or merged is not isle's to
// rewrite).
func parseKubeconfig(data []byte) (*kubeconfig, *x509.Certificate, error) {
	var cfg kubeconfig
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, nil, fmt.Errorf("not a kubeconfig as isle writes it: %w", err)
	}
	if len(cfg.Users) != 1 || len(cfg.Users[0].User.ClientCertificateData) == 0 {
		return nil, nil, fmt.Errorf("not a kubeconfig as isle writes it: %d users, want one with a client certificate", len(cfg.Users))
	}
	cert, err := wire.ParseCertPEM(cfg.Users[0].User.ClientCertificateData)
	if err != nil {
		return nil, nil, fmt.Errorf("user %q: client %w", cfg.Users[0].Name, err)
	}
	return &cfg, cert, nil
}

// KubeconfigClientCert returns the client certificate of a kubeconfig
// that Kubeconfig wrote, and renewable true if it is still as written
// (RenewKubeconfig renews it). Of one edited since (a namespace set,
// merged with other clusters) it returns the certificate of the user
// named user, or of its one user with a certificate, and renewable false.
func KubeconfigClientCert(data []byte, user string) (cert *x509.Certificate, renewable bool, err error) {
	if _, cert, err := parseKubeconfig(data); err == nil {
		return cert, true, nil
	}
	var cfg kubeconfig
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return nil, false, fmt.Errorf("pki: kubeconfig: %w", err)
	}
	var named, withCert []namedUser
	for _, u := range cfg.Users {
		if len(u.User.ClientCertificateData) == 0 {
			continue
		}
		withCert = append(withCert, u)
		if u.Name == user {
			named = append(named, u)
		}
	}
	found := named
	if len(found) == 0 {
		found = withCert
	}
	if len(found) != 1 {
		return nil, false, fmt.Errorf("pki: kubeconfig: %d users with a client certificate, %d named %q; want one", len(withCert), len(named), user)
	}
	if cert, err = wire.ParseCertPEM(found[0].User.ClientCertificateData); err != nil {
		return nil, false, fmt.Errorf("pki: kubeconfig: user %q: client %w", found[0].Name, err)
	}
	return cert, false, nil
}

// RenewKubeconfig returns data, a kubeconfig that Kubeconfig wrote, with
// its client certificate issued anew (same user and groups, a fresh key)
// when that certificate is due for renewal at now (wire.RenewalDue) or
// was signed by a CA being replaced, and with the CAs trusted now; renewed
// is false and out nil when neither changes. A kubeconfig of another form,
// or whose certificate no trusted CA signed, is an error.
func (ca *CA) RenewKubeconfig(data []byte, now time.Time) (out []byte, renewed bool, err error) {
	cfg, cert, err := parseKubeconfig(data)
	if err != nil {
		return nil, false, fmt.Errorf("pki: renew kubeconfig: %w", err)
	}
	if ca.IssuedBy(cert) == nil {
		return nil, false, fmt.Errorf("pki: renew kubeconfig: the client certificate of %q is not signed by CA %q", cert.Subject.CommonName, ca.Cert().Subject.CommonName)
	}
	if len(cfg.Clusters) != 1 {
		return nil, false, fmt.Errorf("pki: renew kubeconfig: %d clusters, want one", len(cfg.Clusters))
	}
	bundle := ca.BundlePEM()
	reissue := wire.RenewalDue(cert, now) || !ca.SignedByCurrent(cert)
	if !reissue && bytes.Equal(cfg.Clusters[0].Cluster.CertificateAuthorityData, bundle) {
		return nil, false, nil
	}
	cfg.Clusters[0].Cluster.CertificateAuthorityData = bundle
	if reissue {
		certPEM, keyPEM, err := ca.IssueClient(cert.Subject.CommonName, cert.Subject.Organization, now)
		if err != nil {
			return nil, false, fmt.Errorf("pki: renew kubeconfig: %w", err)
		}
		cfg.Users[0].User.ClientCertificateData, cfg.Users[0].User.ClientKeyData = certPEM, keyPEM
	}
	if out, err = yaml.Marshal(cfg); err != nil {
		return nil, false, fmt.Errorf("pki: renew kubeconfig: marshal: %w", err)
	}
	return out, true, nil
}
