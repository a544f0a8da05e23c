package ingress

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// tlsSecret returns a TLS Secret with a new self-signed certificate for
// hosts, whose common name is cn.
func tlsSecret(t testing.TB, ns, name, cn string, hosts ...string) (*corev1.Secret, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     hosts,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		},
	}, cert
}

// servedCN returns the common name of the certificate the HTTPS listener
// shows for the server name sni ("" sends none).
func servedCN(t *testing.T, c *Controller, sni string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", c.httpsAddr.String(), &tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("handshake for %q: %v", sni, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func TestTLS(t *testing.T) {
	var logs logBuffer
	c := newController(t, slog.New(slog.NewTextHandler(&logs, nil)))
	seen := make(chan *http.Request, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r
		_, _ = w.Write([]byte("hello"))
	}))
	t.Cleanup(backend.Close)

	secretA, certA := tlsSecret(t, "default", "a", "cert-a", "a.example.com")
	secretB, _ := tlsSecret(t, "default", "b", "cert-b", "b.example.com")
	secretW, _ := tlsSecret(t, "default", "w", "cert-w", "*.w.example.com")
	secretOther, _ := tlsSecret(t, "other", "a", "cert-other-namespace", "o.example.com")
	opaque, _ := tlsSecret(t, "default", "opaque", "cert-opaque", "c.example.com")
	opaque.Type = corev1.SecretTypeOpaque
	corrupt, _ := tlsSecret(t, "default", "corrupt", "cert-corrupt", "d.example.com")
	corrupt.Data[corev1.TLSPrivateKeyKey] = []byte("not a key")
	s := webSnapshot(t, addr(backend))
	s.Ingresses = append(s.Ingresses, newIngress("default", "tls", 2,
		rule("a.example.com", path("Prefix", "/", "web", 80)),
		tlsFor("a", "a.example.com"),
		tlsFor("b", "B.example.com"),
		tlsFor("w", "*.w.example.com"),
		tlsFor("opaque", "c.example.com"),
		tlsFor("corrupt", "d.example.com"),
		tlsFor("missing", "e.example.com"),
	), newIngress("default", "no-hosts", 3,
		rule("o.example.com", path("Prefix", "/", "web", 80)),
		tlsFor("a")), // a Secret of the Ingress's namespace, not other/a
	)
	s.Secrets = []*corev1.Secret{secretA, secretB, secretW, secretOther, opaque, corrupt}
	c.Update(s)
	c.Update(s)

	for sni, want := range map[string]string{
		"a.example.com":   "cert-a",
		"A.EXAMPLE.COM":   "cert-a",
		"b.example.com":   "cert-b",
		"x.w.example.com": "cert-w",
		"o.example.com":   "cert-a",
		"w.example.com":   "isle ingress fallback certificate",
		"c.example.com":   "isle ingress fallback certificate",
		"d.example.com":   "isle ingress fallback certificate",
		"e.example.com":   "isle ingress fallback certificate",
		"":                "isle ingress fallback certificate",
	} {
		if got := servedCN(t, c, sni); got != want {
			t.Errorf("SNI %q: served %q, want %q", sni, got, want)
		}
	}
	for _, want := range []string{
		`ingress default/tls: tls 3: secret default/opaque: type \"Opaque\", want \"kubernetes.io/tls\"`,
		`ingress default/tls: tls 4: secret default/corrupt: tls.crt/tls.key: `,
		`ingress default/tls: tls 5: secret default/missing: not found`,
	} {
		if n := strings.Count(logs.String(), want); n != 1 {
			t.Errorf("log has %q %d times, want once (two Updates):\n%s", want, n, logs.String())
		}
	}

	// HTTP/2 is not offered.
	conn, err := tls.Dial("tcp", c.httpsAddr.String(), &tls.Config{ServerName: "a.example.com", InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := conn.ConnectionState().NegotiatedProtocol; got != "http/1.1" {
		t.Errorf("ALPN chose %q, want http/1.1", got)
	}
	conn.Close()

	// A verified HTTPS request goes through with the forwarded headers of
	// HTTPS.
	roots := x509.NewCertPool()
	roots.AddCert(certA)
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, c.httpsAddr.String())
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Get("https://a.example.com/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello" {
		t.Errorf("HTTPS: got %d %q, want 200 hello", resp.StatusCode, body)
	}
	r := <-seen
	_, port, _ := net.SplitHostPort(c.httpsAddr.String())
	if got := r.Header.Get("X-Forwarded-Proto"); got != "https" {
		t.Errorf("X-Forwarded-Proto %q, want https", got)
	}
	if got := r.Header.Get("X-Forwarded-Port"); got != port {
		t.Errorf("X-Forwarded-Port %q, want %s", got, port)
	}

	// A changed Secret is picked up; a removed one leaves the fallback.
	newA, _ := tlsSecret(t, "default", "a", "cert-a2", "a.example.com")
	s.Secrets[0] = newA
	c.Update(s)
	if got := servedCN(t, c, "a.example.com"); got != "cert-a2" {
		t.Errorf("after the Secret changed: served %q, want cert-a2", got)
	}
	s.Secrets = s.Secrets[1:]
	c.Update(s)
	if got := servedCN(t, c, "a.example.com"); got != "isle ingress fallback certificate" {
		t.Errorf("after the Secret went: served %q, want the fallback", got)
	}
}

func TestTLSOldestIngressWins(t *testing.T) {
	older, _ := tlsSecret(t, "default", "older", "cert-older", "h.example.com")
	newer, _ := tlsSecret(t, "default", "newer", "cert-newer", "h.example.com")
	tb, problems := buildTable(t, Snapshot{
		Classes: isleClasses(),
		Ingresses: []*networkingv1.Ingress{
			newIngress("default", "newer", 2, tlsFor("newer", "h.example.com")),
			newIngress("default", "older", 1, tlsFor("older", "h.example.com")),
		},
		Secrets: []*corev1.Secret{older, newer},
	})
	if len(problems) > 0 {
		t.Errorf("problems: %q", problems)
	}
	if cert := tb.certificate("h.example.com"); cert == nil || cert.Leaf.Subject.CommonName != "cert-older" {
		t.Errorf("h.example.com: certificate %v, want cert-older", cert)
	}
}
