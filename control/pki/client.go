package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// A kubeconfig as clients read it: its current context's cluster and user,
// with client-go's file and -data fields (the fields isle does not read,
// such as exec plugins, are refused by name rather than ignored).
type clientConfig struct {
	Clusters []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server                   string `json:"server"`
			CertificateAuthority     string `json:"certificate-authority"`
			CertificateAuthorityData []byte `json:"certificate-authority-data"`
			InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		Name string `json:"name"`
		User struct {
			ClientCertificate     string `json:"client-certificate"`
			ClientCertificateData []byte `json:"client-certificate-data"`
			ClientKey             string `json:"client-key"`
			ClientKeyData         []byte `json:"client-key-data"`
			Token                 string `json:"token"`
			TokenFile             string `json:"tokenFile"`
			Exec                  any    `json:"exec"`
			AuthProvider          any    `json:"auth-provider"`
		} `json:"user"`
	} `json:"users"`
	Contexts []struct {
		Name    string      `json:"name"`
		Context contextInfo `json:"context"`
	} `json:"contexts"`
	CurrentContext string `json:"current-context"`
}

// Client is what a kubeconfig's current context says of reaching its API
// server.
type Client struct {
	Server *url.URL
	TLS    *tls.Config
	// Token is the bearer token, if the user has one.
	Token string
}

// LoadClient reads the kubeconfig at path and returns its current
// context's server and credentials. Relative file names in it are of
// path's directory, as client-go reads them.
func LoadClient(path string) (*Client, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pki: kubeconfig: %w", err)
	}
	c, err := parseClient(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("pki: kubeconfig %s: %w", path, err)
	}
	return c, nil
}

func parseClient(data []byte, dir string) (*Client, error) {
	var cfg clientConfig
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return nil, err
	}
	if cfg.CurrentContext == "" {
		return nil, errors.New("no current-context")
	}
	var ctx *contextInfo
	for i := range cfg.Contexts {
		if cfg.Contexts[i].Name == cfg.CurrentContext {
			ctx = &cfg.Contexts[i].Context
		}
	}
	if ctx == nil {
		return nil, fmt.Errorf("the current context %q is not among its contexts", cfg.CurrentContext)
	}
	file := func(name string) ([]byte, error) {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return os.ReadFile(name)
	}
	out := &Client{TLS: &tls.Config{MinVersion: tls.VersionTLS12}}
	found := false
	for _, c := range cfg.Clusters {
		if c.Name != ctx.Cluster {
			continue
		}
		found = true
		u, err := url.Parse(c.Cluster.Server)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("cluster %q: server %q: want an https URL", c.Name, c.Cluster.Server)
		}
		out.Server = u
		ca := c.Cluster.CertificateAuthorityData
		if len(ca) == 0 && c.Cluster.CertificateAuthority != "" {
			if ca, err = file(c.Cluster.CertificateAuthority); err != nil {
				return nil, fmt.Errorf("cluster %q: %w", c.Name, err)
			}
		}
		switch {
		case len(ca) > 0:
			out.TLS.RootCAs = x509.NewCertPool()
			if !out.TLS.RootCAs.AppendCertsFromPEM(ca) {
				return nil, fmt.Errorf("cluster %q: no certificate in its certificate authority", c.Name)
			}
		case c.Cluster.InsecureSkipTLSVerify:
			return nil, fmt.Errorf("cluster %q: insecure-skip-tls-verify: isle does not talk to a server it cannot verify", c.Name)
		}
	}
	if !found {
		return nil, fmt.Errorf("the context's cluster %q is not among its clusters", ctx.Cluster)
	}
	found = false
	for _, u := range cfg.Users {
		if u.Name != ctx.User {
			continue
		}
		found = true
		if u.User.Exec != nil || u.User.AuthProvider != nil {
			return nil, fmt.Errorf("user %q: exec and auth-provider credentials are not supported; use kubectl proxy", u.Name)
		}
		cert, key := u.User.ClientCertificateData, u.User.ClientKeyData
		var err error
		if len(cert) == 0 && u.User.ClientCertificate != "" {
			if cert, err = file(u.User.ClientCertificate); err != nil {
				return nil, fmt.Errorf("user %q: %w", u.Name, err)
			}
		}
		if len(key) == 0 && u.User.ClientKey != "" {
			if key, err = file(u.User.ClientKey); err != nil {
				return nil, fmt.Errorf("user %q: %w", u.Name, err)
			}
		}
		if len(cert) > 0 || len(key) > 0 {
			pair, err := tls.X509KeyPair(cert, key)
			if err != nil {
				return nil, fmt.Errorf("user %q: client certificate: %w", u.Name, err)
			}
			out.TLS.Certificates = []tls.Certificate{pair}
		}
		out.Token = u.User.Token
		if out.Token == "" && u.User.TokenFile != "" {
			b, err := file(u.User.TokenFile)
			if err != nil {
				return nil, fmt.Errorf("user %q: %w", u.Name, err)
			}
			out.Token = strings.TrimSpace(string(b))
		}
	}
	if !found {
		return nil, fmt.Errorf("the context's user %q is not among its users", ctx.User)
	}
	return out, nil
}
