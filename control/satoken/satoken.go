// Package satoken issues and verifies service-account tokens: JWTs signed
// with ES256, as kube-apiserver's (the same claims, the same
// kubernetes.io private claim binding a token to its service account and
// to the pod or Secret it was made for), so that client-go's in-cluster
// configuration, TokenReview consumers and OIDC verifiers of the JWKS take
// them.
//
// The signing key is derived from the cluster CA's private key (HKDF), so
// every server holds the same one and no store record carries it; the
// public keys of every key that signed are kept by the caller (KeySet) so
// that tokens signed before a CA replacement stay valid until they expire.
package satoken

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Issuer is the issuer (iss) of the tokens and the OIDC discovery URL's
// base, kube-apiserver's default in a cluster of this domain.
const Issuer = "https://kubernetes.default.svc.cluster.local"

// Limits of a token's life, as kube-apiserver's: at least ten minutes; a
// pod's projected token an hour; isle refuses more than a year (upstream
// has no bound by default).
const (
	MinExpiration     = 10 * time.Minute
	DefaultExpiration = time.Hour
	MaxExpiration     = 365 * 24 * time.Hour
)

// SigningKey derives the token-signing key from the CA's private key
// (PEM): the same on every server that holds the CA, unknown elsewhere.
func SigningKey(caKeyPEM []byte) (*ecdsa.PrivateKey, error) {
	for i := byte(0); i < 8; i++ {
		raw, err := hkdf.Key(sha256.New, caKeyPEM, []byte{i}, "isle service-account token signing key v1", 32)
		if err != nil {
			return nil, fmt.Errorf("satoken: derive the signing key: %w", err)
		}
		if key, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), raw); err == nil {
			return key, nil
		}
	}
	return nil, errors.New("satoken: derive the signing key: no valid scalar")
}

// KeyID is a public key's kid, as kube-apiserver computes it: the
// unpadded base64url SHA-256 of its DER form.
func KeyID(pub *ecdsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("satoken: key ID: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// Ref is an object a token is bound to.
type Ref struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// KubernetesClaims is the token's kubernetes.io private claim.
type KubernetesClaims struct {
	Namespace      string `json:"namespace"`
	ServiceAccount Ref    `json:"serviceaccount"`
	Pod            *Ref   `json:"pod,omitempty"`
	Secret         *Ref   `json:"secret,omitempty"`
	Node           *Ref   `json:"node,omitempty"`
	WarnAfter      *int64 `json:"warnafter,omitempty"`
}

// Claims are a token's claims.
type Claims struct {
	jwt.Claims
	Kubernetes KubernetesClaims `json:"kubernetes.io"`
	// Legacy is set for a Secret's token (IssueLegacy): it has no expiry
	// and no audience, and names its Secret without the uid.
	Legacy bool `json:"-"`
}

// LegacyIssuer is the issuer of the tokens in
// kubernetes.io/service-account-token Secrets, as kube-apiserver's.
const LegacyIssuer = "kubernetes/serviceaccount"

// legacyClaims are the private claims of a Secret's token, named as
// kube-apiserver names them.
type legacyClaims struct {
	Namespace          string `json:"kubernetes.io/serviceaccount/namespace"`
	SecretName         string `json:"kubernetes.io/serviceaccount/secret.name"`
	ServiceAccountName string `json:"kubernetes.io/serviceaccount/service-account.name"`
	ServiceAccountUID  string `json:"kubernetes.io/serviceaccount/service-account.uid"`
}

// Request is what a token is made for.
type Request struct {
	Namespace, ServiceAccount, ServiceAccountUID string
	Audiences                                    []string
	Expiration                                   time.Duration
	// Pod or Secret, if set, bind the token: it is refused once the
	// object is gone. Node is the pod's node.
	Pod, Secret, Node *Ref
}

func signer(key *ecdsa.PrivateKey) (jose.Signer, error) {
	kid, err := KeyID(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		return nil, fmt.Errorf("satoken: %w", err)
	}
	return s, nil
}

// Issue signs a token for req with key, now.
func Issue(key *ecdsa.PrivateKey, req Request, now time.Time) (token string, expires time.Time, err error) {
	signer, err := signer(key)
	if err != nil {
		return "", time.Time{}, err
	}
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", time.Time{}, fmt.Errorf("satoken: %w", err)
	}
	now = now.Truncate(time.Second)
	expires = now.Add(req.Expiration)
	c := Claims{
		Claims: jwt.Claims{Issuer: Issuer, Subject: "system:serviceaccount:" + req.Namespace + ":" + req.ServiceAccount,
			Audience: req.Audiences, Expiry: jwt.NewNumericDate(expires), IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now),
			ID: fmt.Sprintf("%x-%x-%x-%x-%x", jti[:4], jti[4:6], jti[6:8], jti[8:10], jti[10:])},
		Kubernetes: KubernetesClaims{Namespace: req.Namespace, ServiceAccount: Ref{Name: req.ServiceAccount, UID: req.ServiceAccountUID},
			Pod: req.Pod, Secret: req.Secret, Node: req.Node},
	}
	token, err = jwt.Signed(signer).Claims(c).Serialize()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("satoken: sign: %w", err)
	}
	return token, expires, nil
}

// IssueLegacy signs the token of a kubernetes.io/service-account-token
// Secret: as kube-apiserver's, it never expires, has no audience, and is
// valid while the Secret holds it and the service account is the one of
// uid saUID.
func IssueLegacy(key *ecdsa.PrivateKey, namespace, serviceAccount, saUID, secret string) (string, error) {
	signer, err := signer(key)
	if err != nil {
		return "", err
	}
	token, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: LegacyIssuer, Subject: "system:serviceaccount:" + namespace + ":" + serviceAccount}).
		Claims(legacyClaims{Namespace: namespace, SecretName: secret, ServiceAccountName: serviceAccount, ServiceAccountUID: saUID}).Serialize()
	if err != nil {
		return "", fmt.Errorf("satoken: sign: %w", err)
	}
	return token, nil
}

// LooksLikeJWT reports whether token has a JWT's three parts, so that
// other bearer tokens are not parsed as one.
func LooksLikeJWT(token string) bool {
	return strings.Count(token, ".") == 2 && len(token) < 16<<10
}

// Verify checks token's signature against keys (by kid), its issuer, its
// times at now (a minute of leeway) and that one of its audiences is in
// audiences, and returns its claims.
func Verify(token string, keys map[string]*ecdsa.PublicKey, audiences []string, now time.Time) (*Claims, error) {
	parsed, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return nil, fmt.Errorf("satoken: not a token: %w", err)
	}
	if len(parsed.Headers) != 1 {
		return nil, errors.New("satoken: want one signature")
	}
	pub := keys[parsed.Headers[0].KeyID]
	if pub == nil {
		return nil, errors.New("satoken: signed by an unknown key")
	}
	var c Claims
	var legacy legacyClaims
	if err := parsed.Claims(pub, &c, &legacy); err != nil {
		return nil, fmt.Errorf("satoken: %w", err)
	}
	if c.Issuer == LegacyIssuer {
		return verifyLegacy(&c, legacy, audiences)
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Issuer: Issuer, Time: now}, time.Minute); err != nil {
		return nil, fmt.Errorf("satoken: %w", err)
	}
	if c.Expiry == nil {
		return nil, errors.New("satoken: no expiry")
	}
	if !slices.ContainsFunc(audiences, func(a string) bool { return c.Audience.Contains(a) }) {
		return nil, errors.New("satoken: token audiences are invalid for the target audiences")
	}
	if !strings.HasPrefix(c.Subject, "system:serviceaccount:") || c.Kubernetes.Namespace == "" || c.Kubernetes.ServiceAccount.Name == "" ||
		c.Subject != "system:serviceaccount:"+c.Kubernetes.Namespace+":"+c.Kubernetes.ServiceAccount.Name {
		return nil, errors.New("satoken: the subject is no service account")
	}
	return &c, nil
}

// verifyLegacy checks a Secret's token: audience-agnostic, so taken by
// the API server's audiences alone (Issuer), as kube-apiserver does.
func verifyLegacy(c *Claims, l legacyClaims, audiences []string) (*Claims, error) {
	if !slices.Contains(audiences, Issuer) {
		return nil, errors.New("satoken: token audiences are invalid for the target audiences")
	}
	if l.Namespace == "" || l.ServiceAccountName == "" || l.SecretName == "" ||
		c.Subject != "system:serviceaccount:"+l.Namespace+":"+l.ServiceAccountName {
		return nil, errors.New("satoken: the subject is no service account")
	}
	c.Legacy = true
	c.Kubernetes = KubernetesClaims{Namespace: l.Namespace, ServiceAccount: Ref{Name: l.ServiceAccountName, UID: l.ServiceAccountUID},
		Secret: &Ref{Name: l.SecretName}}
	return c, nil
}

// JWKS is the JSON Web Key Set of keys, for /openid/v1/jwks.
func JWKS(keys map[string]*ecdsa.PublicKey) jose.JSONWebKeySet {
	var set jose.JSONWebKeySet
	ids := make([]string, 0, len(keys))
	for id := range keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: keys[id], KeyID: id, Algorithm: string(jose.ES256), Use: "sig"})
	}
	return set
}

// Discovery is the OpenID provider configuration kube-apiserver serves at
// /.well-known/openid-configuration.
func Discovery() map[string]any {
	return map[string]any{
		"issuer":                                Issuer,
		"jwks_uri":                              Issuer + "/openid/v1/jwks",
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{string(jose.ES256)},
	}
}
