package apiserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/control/satoken"
)

// testTokens issues with one key, as a server does with its CA's.
type testTokens struct {
	once sync.Once
	key  *ecdsa.PrivateKey
}

func (k *testTokens) signer() *ecdsa.PrivateKey {
	k.once.Do(func() { k.key, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader) })
	return k.key
}

func (k *testTokens) keys() map[string]*ecdsa.PublicKey {
	kid, _ := satoken.KeyID(&k.signer().PublicKey)
	return map[string]*ecdsa.PublicKey{kid: &k.signer().PublicKey}
}

func (k *testTokens) Issue(req satoken.Request) (string, time.Time, error) {
	return satoken.Issue(k.signer(), req, time.Now())
}

func (k *testTokens) IssueLegacy(ns, sa, saUID, secret string) (string, error) {
	return satoken.IssueLegacy(k.signer(), ns, sa, saUID, secret)
}

func (k *testTokens) Verify(token string, audiences []string) (*satoken.Claims, error) {
	return satoken.Verify(token, k.keys(), audiences, time.Now())
}

func (k *testTokens) JWKS() jose.JSONWebKeySet { return satoken.JWKS(k.keys()) }

// TestServiceAccountTokens: TokenRequest, the tokens as credentials,
// bound to their pod and service account, their audiences in
// TokenReview, and the issuer discovery documents.
func TestServiceAccountTokens(t *testing.T) {
	e := newEnv(t)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/serviceaccounts", `{"metadata":{"name":"bot"}}`), 201)
	pod := strings.Replace(podJSON("p", "a"), `"containers"`, `"serviceAccountName":"bot","containers"`, 1)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", pod), 201)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", podJSON("other", "b")), 201)
	request := func(token, body string) (string, response) {
		r := e.as(t, token, "POST", "/api/v1/namespaces/default/serviceaccounts/bot/token", body)
		var tr authenticationv1.TokenRequest
		if r.code == 201 {
			r.decode(t, &tr)
		}
		return tr.Status.Token, r
	}
	tok, r := request(adminToken, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}`)
	if r.code != 201 || !satoken.LooksLikeJWT(tok) {
		t.Fatalf("TokenRequest: %s", r)
	}
	// The token is the service account's credential; RBAC grants it
	// nothing yet.
	st := mustCode(t, e.do(t, req{path: "/api/v1/namespaces/default/pods", token: tok}), 403).status(t)
	if !strings.Contains(st.Message, `User "system:serviceaccount:default:bot" cannot list resource "pods"`) {
		t.Errorf("the service account's 403: %q", st.Message)
	}
	var who authenticationv1.SelfSubjectReview
	mustCode(t, e.do(t, req{method: "POST", path: "/apis/authentication.k8s.io/v1/selfsubjectreviews", token: tok,
		body: `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`, header: map[string]string{"Content-Type": "application/json"}}), 201).decode(t, &who)
	if ui := who.Status.UserInfo; ui.Username != "system:serviceaccount:default:bot" || strings.Join(ui.Groups, ",") != "system:serviceaccounts,system:serviceaccounts:default,system:authenticated" {
		t.Errorf("whoami: %+v", ui)
	}
	// Bound to its pod: refused once the pod is gone.
	bound, r := request(adminToken, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"p"},"expirationSeconds":600}}`)
	if r.code != 201 {
		t.Fatalf("bound TokenRequest: %s", r)
	}
	mustCode(t, e.do(t, req{path: "/api/v1/namespaces/default/pods", token: bound}), 403)
	// Its node named in the token with the node's uid, as kube-apiserver's.
	var node corev1.Node
	mustCode(t, e.admin(t, "POST", "/api/v1/nodes", `{"metadata":{"name":"a"}}`), 201).decode(t, &node)
	withNode, _ := request(adminToken, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"p"}}}`)
	var nodeRev authenticationv1.TokenReview
	mustCode(t, e.admin(t, "POST", "/apis/authentication.k8s.io/v1/tokenreviews",
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"`+withNode+`"}}`), 201).decode(t, &nodeRev)
	if x := nodeRev.Status.User.Extra; strings.Join(x["authentication.kubernetes.io/node-uid"], ",") != string(node.UID) ||
		strings.Join(x["authentication.kubernetes.io/node-name"], ",") != "a" || strings.Join(x["authentication.kubernetes.io/pod-name"], ",") != "p" {
		t.Errorf("the pod-bound token's extra: %v", x)
	}
	// Wrong pod (runs as another service account), too short, unknown kind.
	for body, code := range map[string]int{
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"other"}}}`:  400,
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":60}}`:                                            422,
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"boundObjectRef":{"kind":"Node","apiVersion":"v1","name":"a"}}}`:     422,
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"absent"}}}`: 404,
	} {
		if _, r := request(adminToken, body); r.code != code {
			t.Errorf("%s: %d, want %d: %s", body, r.code, code, r)
		}
	}
	// A node asks tokens for its own pods alone.
	if _, r := request(nodeAToken, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"p"}}}`); r.code != 201 {
		t.Errorf("node a's token for its pod: %s", r)
	}
	if _, r := request(nodeAToken, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}`); r.code != 403 {
		t.Errorf("node a's unbound token: %s", r)
	}
	mustCode(t, e.admin(t, "DELETE", "/api/v1/namespaces/default/pods/p?gracePeriodSeconds=0", ""), 200)
	eventually(t, "the pod's token refused", func() bool {
		return e.do(t, req{path: "/api/v1/namespaces/default/pods", token: bound}).code == 401
	})
	// Another audience: not the API's, but TokenReview for that audience
	// takes it.
	vault, _ := request(adminToken, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"audiences":["vault"]}}`)
	mustCode(t, e.do(t, req{path: "/api/v1/namespaces/default/pods", token: vault}), 401)
	var rev, apiRev authenticationv1.TokenReview
	mustCode(t, e.admin(t, "POST", "/apis/authentication.k8s.io/v1/tokenreviews",
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"`+vault+`","audiences":["vault"]}}`), 201).decode(t, &rev)
	if !rev.Status.Authenticated || rev.Status.User.Username != "system:serviceaccount:default:bot" || strings.Join(rev.Status.Audiences, ",") != "vault" {
		t.Errorf("TokenReview for vault: %+v", rev.Status)
	}
	mustCode(t, e.admin(t, "POST", "/apis/authentication.k8s.io/v1/tokenreviews",
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"`+vault+`"}}`), 201).decode(t, &apiRev)
	if apiRev.Status.Authenticated || !strings.Contains(apiRev.Status.Error, "audiences") {
		t.Errorf("TokenReview of a vault token for the API: %+v", apiRev.Status)
	}
	// Issuer discovery, for service accounts (and anyone RBAC lets).
	var disc map[string]any
	mustCode(t, e.do(t, req{path: "/.well-known/openid-configuration", token: tok}), 200).decode(t, &disc)
	if disc["issuer"] != satoken.Issuer {
		t.Errorf("discovery: %v", disc)
	}
	var jwks jose.JSONWebKeySet
	mustCode(t, e.do(t, req{path: "/openid/v1/jwks", token: tok}), 200).decode(t, &jwks)
	if len(jwks.Keys) != 1 || jwks.Keys[0].Algorithm != "ES256" {
		t.Errorf("JWKS: %+v", jwks)
	}
	mustCode(t, e.do(t, req{path: "/openid/v1/jwks", token: nobodyToken}), 403)
	// The service account made again: its old tokens are refused.
	mustCode(t, e.admin(t, "DELETE", "/api/v1/namespaces/default/serviceaccounts/bot", ""), 200)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/serviceaccounts", `{"metadata":{"name":"bot"}}`), 201)
	mustCode(t, e.do(t, req{path: "/api/v1/namespaces/default/pods", token: tok}), 401)
}

// TestLegacyServiceAccountToken: a kubernetes.io/service-account-token
// Secret's token is the service account's credential while the Secret
// holds it.
func TestLegacyServiceAccountToken(t *testing.T) {
	e := newEnv(t)
	var sa corev1.ServiceAccount
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/serviceaccounts", `{"metadata":{"name":"robot"}}`), 201).decode(t, &sa)
	tok, _ := e.tokens.IssueLegacy("default", "robot", string(sa.UID), "robot-token")
	mustCode(t, e.do(t, req{path: "/api/v1/namespaces/default/pods", token: tok}), 401) // no such Secret
	secret := func(token string) string {
		return `{"metadata":{"name":"robot-token","annotations":{"kubernetes.io/service-account.name":"robot"}},"type":"kubernetes.io/service-account-token","stringData":{"token":"` + token + `"}}`
	}
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/secrets", secret(tok)), 201)
	st := mustCode(t, e.do(t, req{path: "/api/v1/namespaces/default/pods", token: tok}), 403).status(t)
	if !strings.Contains(st.Message, `User "system:serviceaccount:default:robot"`) {
		t.Errorf("the Secret's token: %q", st.Message)
	}
	// The Secret's token replaced: the old one refused.
	mustCode(t, e.admin(t, "PUT", "/api/v1/namespaces/default/secrets/robot-token", secret("another")), 200)
	mustCode(t, e.do(t, req{path: "/api/v1/namespaces/default/pods", token: tok}), 401)
	// Its service account made again: refused too.
	mustCode(t, e.admin(t, "PUT", "/api/v1/namespaces/default/secrets/robot-token", secret(tok)), 200)
	mustCode(t, e.do(t, req{path: "/api/v1/namespaces/default/pods", token: tok}), 403)
	mustCode(t, e.admin(t, "DELETE", "/api/v1/namespaces/default/serviceaccounts/robot", ""), 200)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/serviceaccounts", `{"metadata":{"name":"robot"}}`), 201)
	mustCode(t, e.do(t, req{path: "/api/v1/namespaces/default/pods", token: tok}), 401)
}
