package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/wire"
)

// startTLSServer serves, over 127.0.0.1, the name of the client certificate's
// subject ("CN=...;O=...") or "anonymous".
func startTLSServer(t *testing.T, cfg *tls.Config) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			fmt.Fprint(w, "anonymous")
			return
		}
		c := r.TLS.PeerCertificates[0]
		fmt.Fprintf(w, "CN=%s;O=%s", c.Subject.CommonName, strings.Join(c.Subject.Organization, ","))
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // rejected handshakes are expected
	serveTLS(t, s, cfg)
	return s
}

// serveTLS starts s with cfg as it is: httptest's StartTLS would add a
// certificate of its own, which a handshake without a server name gets
// before GetCertificate.
func serveTLS(t *testing.T, s *httptest.Server, cfg *tls.Config) {
	t.Helper()
	s.Listener = tls.NewListener(s.Listener, cfg)
	s.Start()
	s.URL = strings.Replace(s.URL, "http://", "https://", 1)
	t.Cleanup(s.Close)
}

// get fetches url with cfg and returns the body and the negotiated TLS version.
func get(t *testing.T, url string, cfg *tls.Config) (string, uint16, error) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: cfg}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(url)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", 0, err
	}
	return string(body), resp.TLS.Version, nil
}

// mustServerConfig serves a ServingLeaf of ca like mustServing's.
func mustServerConfig(t *testing.T, ca *CA) *tls.Config {
	t.Helper()
	leaf, err := ca.ServingLeaf("isle-apiserver", []string{"isle-1.local"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ServerConfig(ca, leaf)
	if err != nil {
		t.Fatalf("ServerConfig: %v", err)
	}
	return cfg
}

func mustKeyPair(t *testing.T, certPEM, keyPEM []byte) tls.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

func TestServerConfig(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	certPEM, keyPEM := mustServing(t, ca)
	cfg := mustServerConfig(t, ca)
	if cfg.MinVersion != tls.VersionTLS12 || cfg.ClientAuth != tls.VerifyClientCertIfGiven {
		t.Errorf("MinVersion %x, ClientAuth %v; want TLS 1.2 and VerifyClientCertIfGiven", cfg.MinVersion, cfg.ClientAuth)
	}
	served, err := cfg.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if chain := served.Certificate; len(chain) != 2 || string(chain[1]) != string(ca.Cert().Raw) {
		t.Errorf("served chain has %d certificates, want the leaf then the CA", len(chain))
	}
	if again, _ := cfg.GetCertificate(nil); again != served {
		t.Error("a second handshake got another chain, though the certificate was not renewed")
	}

	s := startTLSServer(t, cfg)
	adminCert, adminKey := mustClient(t, ca, "isle-admin", "system:masters")
	other := mustCA(t, "other-ca")
	strangerCert, strangerKey := mustClient(t, other, "isle-admin", "system:masters")
	servingAsClient := mustKeyPair(t, certPEM, keyPEM)

	tests := []struct {
		name     string
		certs    []tls.Certificate
		maxVer   uint16
		wantBody string
		wantVer  uint16
		wantErr  string // empty: success
	}{
		{"client certificate from the CA", []tls.Certificate{mustKeyPair(t, adminCert, adminKey)}, 0, "CN=isle-admin;O=system:masters", tls.VersionTLS13, ""},
		{"no client certificate (bearer token path)", nil, 0, "anonymous", tls.VersionTLS13, ""},
		{"TLS 1.2 client", []tls.Certificate{mustKeyPair(t, adminCert, adminKey)}, tls.VersionTLS12, "CN=isle-admin;O=system:masters", tls.VersionTLS12, ""},
		{"TLS 1.1 client", nil, tls.VersionTLS11, "", 0, "protocol version"},
		{"client certificate from another CA", []tls.Certificate{mustKeyPair(t, strangerCert, strangerKey)}, 0, "", 0, "unknown certificate authority"},
		{"serving certificate used as client certificate", []tls.Certificate{servingAsClient}, 0, "", 0, "bad certificate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tc.maxVer}
			if len(tc.certs) > 0 {
				// Send the certificate even if the server's list of
				// acceptable CAs does not name its issuer.
				client.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
					return &tc.certs[0], nil
				}
			}
			body, ver, err := get(t, s.URL, client)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %q, %v; want an error containing %q", body, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			if body != tc.wantBody || ver != tc.wantVer {
				t.Errorf("got %q over %s, want %q over %s", body, tls.VersionName(ver), tc.wantBody, tls.VersionName(tc.wantVer))
			}
		})
	}
}

func TestServerConfigErrors(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	other := mustCA(t, "other-ca")
	otherLeaf, err := other.ServingLeaf("isle-apiserver", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		ca   *CA
		leaf *Leaf
		want string
	}{
		{"no CA", nil, otherLeaf, "no CA certificate"},
		{"no certificate", ca, nil, "no serving certificate"},
		{"issued by another CA", ca, otherLeaf, `is not signed by CA "isle-ca"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ServerConfig(tc.ca, tc.leaf)
			if err == nil || !strings.HasPrefix(err.Error(), "pki: server config: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestPinnedClientConfig(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	hash := wire.CAHash(ca.Cert())
	certPEM, keyPEM := mustServing(t, ca)
	good := startTLSServer(t, mustServerConfig(t, ca))

	other := mustCA(t, "other-ca")
	otherCert, otherKey := mustServing(t, other)
	otherServer := startTLSServer(t, mustServerConfig(t, other))

	// An impostor sends our (public) CA certificate after a leaf of its own CA.
	impostorPair := mustKeyPair(t, otherCert, otherKey)
	impostorPair.Certificate = [][]byte{impostorPair.Certificate[0], ca.Cert().Raw}
	impostor := startTLSServer(t, &tls.Config{Certificates: []tls.Certificate{impostorPair}})

	// A server that does not send the CA certificate.
	leafOnly := startTLSServer(t, &tls.Config{Certificates: []tls.Certificate{mustKeyPair(t, certPEM, keyPEM)}})

	// A client certificate of our CA used as a serving certificate.
	clientCert, clientKey := mustClient(t, ca, "isle-node-1", "system:nodes")
	clientPair := mustKeyPair(t, clientCert, clientKey)
	clientPair.Certificate = append(clientPair.Certificate, ca.Cert().Raw)
	clientAsServer := startTLSServer(t, &tls.Config{Certificates: []tls.Certificate{clientPair}})

	tests := []struct {
		name       string
		server     *httptest.Server
		hash       string
		serverName string
		wantErr    string // empty: success
	}{
		{"matching hash, IP name", good, hash, "127.0.0.1", ""},
		{"matching hash, DNS name", good, hash, "localhost", ""},
		{"matching hash, no name", good, hash, "", ""},
		{"bare upper-case hex hash", good, strings.ToUpper(strings.TrimPrefix(hash, "sha256:")), "127.0.0.1", ""},
		{"hash from a parsed token", good, tokenHash(t, ca), "127.0.0.1", ""},
		{"wrong hash", good, wire.CAHash(other.Cert()), "127.0.0.1", "no CA certificate with hash"},
		{"empty hash", good, "", "127.0.0.1", "empty CA hash"},
		{"wrong server name", good, hash, "evil.example", "certificate is valid for"},
		{"server of another CA", otherServer, hash, "127.0.0.1", "no CA certificate with hash"},
		{"impostor sending our CA", impostor, hash, "127.0.0.1", "unknown authority"},
		{"server without CA in chain", leafOnly, hash, "127.0.0.1", "no CA certificate with hash"},
		{"client certificate as serving certificate", clientAsServer, hash, "", "incompatible key usage"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body, _, err := get(t, tc.server.URL, wire.PinnedClientConfig(tc.hash, tc.serverName, nil))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("request: %v", err)
				}
				if body != "anonymous" {
					t.Errorf("body %q, want anonymous", body)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestPinnedClientConfigWithClientCert(t *testing.T) {
	// A joiner that already holds a client certificate can present it.
	ca := mustCA(t, "isle-ca")
	s := startTLSServer(t, mustServerConfig(t, ca))
	nodeCert, nodeKey := mustClient(t, ca, "system:node:isle-2", "system:nodes")
	cfg := wire.PinnedClientConfig(wire.CAHash(ca.Cert()), "127.0.0.1", nil)
	cfg.Certificates = []tls.Certificate{mustKeyPair(t, nodeCert, nodeKey)}
	body, _, err := get(t, s.URL, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := "CN=system:node:isle-2;O=system:nodes"; body != want {
		t.Errorf("body %q, want %q", body, want)
	}
}

func TestVerifyPinnedNoCertificates(t *testing.T) {
	if err := verifyPinned(nil, "sha256:00", ""); err == nil || !strings.Contains(err.Error(), "no certificate") {
		t.Errorf("verifyPinned(nil) = %v, want no-certificate error", err)
	}
	ca := mustCA(t, "isle-ca")
	// The CA alone, sent as the leaf, is not accepted: the CA must follow a leaf.
	err := verifyPinned([]*x509.Certificate{ca.Cert()}, wire.CAHash(ca.Cert()), "")
	if err == nil {
		t.Error("verifyPinned accepted a chain holding only the CA")
	}
}

func TestVerifyPinnedClock(t *testing.T) {
	// A serving certificate issued by a server whose clock is a day ahead
	// of this board's: not valid yet here.
	tomorrow := func(ca *CA) *x509.Certificate {
		t.Helper()
		certPEM, _, err := ca.IssueServing("isle-apiserver", nil, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Now().Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		cert, err := wire.ParseCertPEM(certPEM)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	ca := mustCA(t, "isle-ca")
	// Of the pinned CA: the board's clock is wrong, not the server.
	err := verifyPinned([]*x509.Certificate{tomorrow(ca), ca.Cert()}, wire.CAHash(ca.Cert()), "127.0.0.1")
	if !errors.Is(err, wire.ErrClock) {
		t.Errorf("certificate not valid yet: %v, want wire.ErrClock", err)
	}
	// With the board's clock set by the cluster's (a day ahead here), the
	// same chain verifies.
	ahead := func() time.Time { return time.Now().Add(25 * time.Hour) }
	vc := wire.PinnedClientConfig(wire.CAHash(ca.Cert()), "127.0.0.1", ahead).VerifyConnection
	if err := vc(tls.ConnectionState{PeerCertificates: []*x509.Certificate{tomorrow(ca), ca.Cert()}}); err != nil {
		t.Errorf("certificate valid at the board's clock: %v", err)
	}
	// An impostor's, sent with the pinned CA's certificate: refused as an
	// impostor's, whatever the time.
	err = verifyPinned([]*x509.Certificate{tomorrow(mustCA(t, "other-ca")), ca.Cert()}, wire.CAHash(ca.Cert()), "127.0.0.1")
	if err == nil || errors.Is(err, wire.ErrClock) {
		t.Errorf("impostor's certificate: %v, want a refusal that is not wire.ErrClock", err)
	}
}

func tokenHash(t *testing.T, ca *CA) string {
	t.Helper()
	tok, err := wire.NewToken(ca.Cert())
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := wire.ParseToken(tok.String())
	if err != nil {
		t.Fatal(err)
	}
	return parsed.CAHash
}

// verifyPinned is the pinned verification of wire.PinnedClientConfig, as a
// handshake runs it.
func verifyPinned(certs []*x509.Certificate, caHash, serverName string) error {
	return wire.PinnedClientConfig(caHash, serverName, nil).VerifyConnection(tls.ConnectionState{PeerCertificates: certs})
}
