package pki

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"

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
	out, err := yaml.Marshal(cfg)
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
