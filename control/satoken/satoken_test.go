package satoken

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"
)

func caKeyPEM(t *testing.T) []byte {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalECPrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

func TestSigningKeyIsDerived(t *testing.T) {
	ca := caKeyPEM(t)
	a, err := SigningKey(ca)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := SigningKey(ca)
	c, _ := SigningKey(caKeyPEM(t))
	if !a.Equal(b) || a.Equal(c) {
		t.Errorf("the same CA key must give the same signing key, another CA another")
	}
}

func TestIssueAndVerify(t *testing.T) {
	key, _ := SigningKey(caKeyPEM(t))
	kid, _ := KeyID(&key.PublicKey)
	keys := map[string]*ecdsa.PublicKey{kid: &key.PublicKey}
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	req := Request{Namespace: "team", ServiceAccount: "bot", ServiceAccountUID: "sa-uid", Audiences: []string{Issuer},
		Expiration: time.Hour, Pod: &Ref{Name: "p", UID: "pod-uid"}, Node: &Ref{Name: "pi1", UID: "node-uid"}}
	tok, exp, err := Issue(key, req, now)
	if err != nil || !exp.Equal(now.Add(time.Hour)) || !LooksLikeJWT(tok) {
		t.Fatalf("issue: %v %v", err, exp)
	}
	c, err := Verify(tok, keys, []string{Issuer}, now.Add(30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "system:serviceaccount:team:bot" || c.Kubernetes.Pod.UID != "pod-uid" || c.Kubernetes.ServiceAccount.UID != "sa-uid" {
		t.Errorf("claims: %+v", c)
	}
	// The claims as kube-apiserver's: the payload's kubernetes.io claim.
	payload := strings.Split(tok, ".")[1]
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m["kubernetes.io"].(map[string]any)["pod"].(map[string]any)["name"] != "p" || m["iss"] != Issuer {
		t.Errorf("payload %s: %v", raw, err)
	}
	other, _ := SigningKey(caKeyPEM(t))
	forged, _, _ := Issue(other, req, now)
	for name, tc := range map[string]struct {
		token string
		aud   []string
		at    time.Time
		want  string
	}{
		"expired":        {tok, []string{Issuer}, now.Add(2 * time.Hour), "expired"},
		"not yet":        {tok, []string{Issuer}, now.Add(-time.Hour), "not valid yet"},
		"other audience": {tok, []string{"vault"}, now, "audiences"},
		"unknown key":    {forged, []string{Issuer}, now, "unknown key"},
		"garbage":        {"a.b.c", []string{Issuer}, now, "not a token"},
		"tampered":       {tok[:len(tok)-4] + "AAAA", []string{Issuer}, now, "satoken"},
	} {
		if _, err := Verify(tc.token, keys, tc.aud, tc.at); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
	set := JWKS(keys)
	if len(set.Keys) != 1 || set.Keys[0].KeyID != kid || set.Keys[0].Algorithm != "ES256" {
		t.Errorf("JWKS: %+v", set)
	}
}

func TestLegacyToken(t *testing.T) {
	key, _ := SigningKey(caKeyPEM(t))
	kid, _ := KeyID(&key.PublicKey)
	keys := map[string]*ecdsa.PublicKey{kid: &key.PublicKey}
	tok, err := IssueLegacy(key, "team", "robot", "sa-uid", "robot-token")
	if err != nil {
		t.Fatal(err)
	}
	// As kube-apiserver's: its issuer and flat private claims, no expiry.
	raw, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m["iss"] != LegacyIssuer || m["kubernetes.io/serviceaccount/secret.name"] != "robot-token" ||
		m["sub"] != "system:serviceaccount:team:robot" || m["exp"] != nil {
		t.Errorf("payload %s: %v", raw, err)
	}
	// Valid years later, for the API's audience alone.
	c, err := Verify(tok, keys, []string{Issuer}, time.Now().Add(10*365*24*time.Hour))
	if err != nil || !c.Legacy || c.Kubernetes.Secret.Name != "robot-token" || c.Kubernetes.ServiceAccount.UID != "sa-uid" || c.Kubernetes.Namespace != "team" {
		t.Fatalf("verify: %+v %v", c, err)
	}
	if _, err := Verify(tok, keys, []string{"vault"}, time.Now()); err == nil || !strings.Contains(err.Error(), "audiences") {
		t.Errorf("another audience: %v", err)
	}
	other, _ := SigningKey(caKeyPEM(t))
	forged, _ := IssueLegacy(other, "team", "robot", "sa-uid", "robot-token")
	if _, err := Verify(forged, keys, []string{Issuer}, time.Now()); err == nil {
		t.Errorf("a token of another key taken")
	}
}
