package apiserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
)

func csrJSON(t *testing.T, name, signer, usages string) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, key)
	if err != nil {
		t.Fatal(err)
	}
	req := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	return `{"apiVersion":"certificates.k8s.io/v1","kind":"CertificateSigningRequest","metadata":{"name":"` + name + `"},` +
		`"spec":{"request":"` + req + `","signerName":"` + signer + `","usages":` + usages + `,"username":"someone-else","groups":["system:masters"]}}`
}

// TestCSR: the requester is recorded whatever the body says; validation
// names the field; approving needs the approve verb on the signer as well
// as the approval subresource.
func TestCSR(t *testing.T) {
	e := newEnv(t)
	const csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
	mustCode(t, e.admin(t, "POST", rbacPath+"clusterroles", `{"metadata":{"name":"csr-requester"},"rules":[{"apiGroups":["certificates.k8s.io"],"resources":["certificatesigningrequests","certificatesigningrequests/approval"],"verbs":["create","get","update"]}]}`), 201)
	mustCode(t, e.admin(t, "POST", rbacPath+"clusterrolebindings", `{"metadata":{"name":"nobody-csr"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"csr-requester"},"subjects":[{"kind":"User","name":"nobody"}]}`), 201)
	eventually(t, "nobody may create CSRs", func() bool {
		return e.canI(t, nobodyToken, "create", "certificatesigningrequests.certificates.k8s.io", "")
	})

	var got certificatesv1.CertificateSigningRequest
	mustCode(t, e.as(t, nobodyToken, "POST", csrs, csrJSON(t, "mine", "kubernetes.io/kube-apiserver-client", `["client auth"]`)), 201).decode(t, &got)
	if got.Spec.Username != "nobody" || strings.Join(got.Spec.Groups, ",") != "system:authenticated" {
		t.Errorf("requester recorded: %q %v", got.Spec.Username, got.Spec.Groups)
	}
	for body, want := range map[string]string{
		csrJSON(t, "a", "example", `["client auth"]`):                                                                                   "spec.signerName",
		csrJSON(t, "b", "kubernetes.io/kube-apiserver-client", `[]`):                                                                    "spec.usages: Required value",
		csrJSON(t, "c", "kubernetes.io/kube-apiserver-client", `["client auth","client auth"]`):                                         "spec.usages[1]: Duplicate value",
		strings.Replace(csrJSON(t, "d", "kubernetes.io/kube-apiserver-client", `["client auth"]`), `"request":"`, `"request":"AAAA`, 1): "spec.request",
	} {
		st := mustCode(t, e.admin(t, "POST", csrs, body), 422).status(t)
		if !strings.Contains(st.Message, want) {
			t.Errorf("invalid CSR: %q, want %q", st.Message, want)
		}
	}

	approve := func(token string) response {
		var cur certificatesv1.CertificateSigningRequest
		mustCode(t, e.admin(t, "GET", csrs+"/mine", ""), 200).decode(t, &cur)
		cur.Status.Conditions = append(cur.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: "Approved", Status: "True", Reason: "Test"})
		return e.as(t, token, "PUT", csrs+"/mine/approval", toJSON(t, &cur))
	}
	st := mustCode(t, approve(nobodyToken), 403).status(t)
	if !strings.Contains(st.Message, `user not permitted to approve requests with signerName "kubernetes.io/kube-apiserver-client"`) {
		t.Errorf("approval without the approve verb: %q", st.Message)
	}
	mustCode(t, e.admin(t, "POST", rbacPath+"clusterroles", `{"metadata":{"name":"approver"},"rules":[{"apiGroups":["certificates.k8s.io"],"resources":["signers"],"resourceNames":["kubernetes.io/*"],"verbs":["approve"]}]}`), 201)
	mustCode(t, e.admin(t, "POST", rbacPath+"clusterrolebindings", `{"metadata":{"name":"nobody-approves"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"approver"},"subjects":[{"kind":"User","name":"nobody"}]}`), 201)
	eventually(t, "nobody may approve", func() bool { return approve(nobodyToken).code == 200 })
	mustCode(t, e.admin(t, "GET", csrs+"/mine/approval", ""), 200).decode(t, &got)
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != "Approved" || len(got.Status.Certificate) != 0 {
		t.Errorf("after the approval: %+v", got.Status)
	}
	// Approved and Denied exclude each other; a decision stays.
	got.Status.Conditions = append(got.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: "Denied", Status: "True"})
	if st := mustCode(t, e.admin(t, "PUT", csrs+"/mine/approval", toJSON(t, &got)), 422).status(t); !strings.Contains(st.Message, "mutually exclusive") {
		t.Errorf("approved and denied: %q", st.Message)
	}
	got.Status.Conditions = nil
	if st := mustCode(t, e.admin(t, "PUT", csrs+"/mine/approval", toJSON(t, &got)), 422).status(t); !strings.Contains(st.Message, "may not remove a condition of type Approved") {
		t.Errorf("approval removed: %q", st.Message)
	}
}
