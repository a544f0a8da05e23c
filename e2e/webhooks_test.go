package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/node/containers/ctrtest"
)

// admissionWebhooks runs a validating and a mutating webhook in a pod
// behind a Service, with a certificate of a CA of the test's for
// hook.hooks.svc, and checks what kubectl sees of them in the namespace
// they watch: a refusal naming the webhook, the mutation (of the pods a
// Deployment's controllers make too), warnings, dry runs; then the pod
// gone, failurePolicy Fail refusing at once rather than hanging.
func admissionWebhooks(t *testing.T, b *podBoard) {
	caPEM, certPEM, keyPEM := webhookCerts(t, "hook.hooks.svc")
	img := ctrtest.Busybox(t)
	img.Files["/usr/bin/webhookserver"] = ctrtest.File{Data: ctrtest.GoBinary(t, "github.com/isle-cluster/isle/e2e/webhookserver"), Mode: 0o755}
	img.Entrypoint, img.Cmd = []string{"/usr/bin/webhookserver"}, nil
	image := b.isl.image(ctrtest.Push(t, b.isl.state.RegistryAddr(), "isle/webhookserver:1", img, nil))
	indent := func(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n          ") }
	b.apply(t, fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: hooks}
---
apiVersion: v1
kind: Namespace
metadata: {name: hooked, labels: {webhooks: "on"}}
---
apiVersion: v1
kind: Pod
metadata: {name: hook, namespace: hooks, labels: {app: hook}}
spec:
  containers:
  - name: hook
    image: %s
    env:
    - name: TLS_CERT
      value: |
          %s
    - name: TLS_KEY
      value: |
          %s
    readinessProbe:
      tcpSocket: {port: 8443}
      periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: hook, namespace: hooks}
spec:
  selector: {app: hook}
  ports: [{name: https, port: 443, targetPort: 8443}]
`, image, indent(certPEM), indent(keyPEM)))
	waitFor(t, 90*time.Second, "the webhook pod Ready", func() bool {
		out, _, err := b.kubectl.run("", "-n", "hooks", "get", "pod", "hook", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return err == nil && out == "True"
	})
	ca := base64.StdEncoding.EncodeToString([]byte(caPEM))
	b.apply(t, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: isle-e2e-deny}
webhooks:
- name: deny.isle.test
  clientConfig:
    service: {namespace: hooks, name: hook, path: /validate}
    caBundle: %[1]s
  rules:
  - {operations: [CREATE, UPDATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}
  namespaceSelector: {matchLabels: {webhooks: "on"}}
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 5
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: isle-e2e-label}
webhooks:
- name: label.isle.test
  clientConfig:
    service: {namespace: hooks, name: hook, path: /mutate}
    caBundle: %[1]s
  rules:
  - {operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps, pods]}
  namespaceSelector: {matchLabels: {webhooks: "on"}}
  sideEffects: NoneOnDryRun
  admissionReviewVersions: [v1beta1, v1]
`, ca))
	out := b.kubectl.ok(t, "get", "validatingwebhookconfigurations,mutatingwebhookconfigurations")
	if !strings.Contains(out, "isle-e2e-deny") || !strings.Contains(out, "isle-e2e-label") || !strings.Contains(out, "WEBHOOKS") {
		t.Errorf("kubectl get of the configurations:\n%s", out)
	}

	// The servers take up the configurations through their watches, and
	// find the hook Service's address through its EndpointSlice: both
	// follow the writes. Wait until a dry run meets both webhooks.
	waitFor(t, 30*time.Second, "both webhooks called", func() bool {
		_, errOut, err := b.kubectl.run("", "-n", "hooked", "create", "configmap", "ready", "--from-literal=deny=1", "--dry-run=server")
		if err == nil || !strings.Contains(errOut, "denied the request") {
			return false
		}
		out, _, err := b.kubectl.run("", "-n", "hooked", "create", "configmap", "ready", "--dry-run=server", "-o", "jsonpath={.metadata.labels.webhook}")
		return err == nil && out == "seen"
	})

	// Refused, naming the webhook and saying why.
	_, errOut, err := b.kubectl.run("", "-n", "hooked", "create", "configmap", "bad", "--from-literal=deny=1")
	if err == nil || !strings.Contains(errOut, `admission webhook "deny.isle.test" denied the request: the webhook pod refuses ConfigMaps with a key deny`) {
		t.Errorf("a ConfigMap the webhook refuses: %v\n%s", err, errOut)
	}
	// Allowed, with the webhook's warning, and labelled by the mutating one.
	_, errOut, err = b.kubectl.run("", "-n", "hooked", "create", "configmap", "good", "--from-literal=warn=1")
	if err != nil || !strings.Contains(errOut, "Warning: the webhook pod warns of a key warn") {
		t.Errorf("a ConfigMap the webhook warns of: %v\n%s", err, errOut)
	}
	if got := b.kubectl.ok(t, "-n", "hooked", "get", "configmap", "good", "-o", "jsonpath={.metadata.labels.webhook}"); got != "seen" {
		t.Errorf("the mutating webhook's label: %q, want seen", got)
	}
	// Elsewhere nothing is sent.
	b.kubectl.ok(t, "-n", "hooks", "create", "configmap", "unwatched", "--from-literal=deny=1")
	// A dry run goes to a webhook without side effects, and stores nothing.
	if _, errOut, err := b.kubectl.run("", "-n", "hooked", "create", "configmap", "dry", "--from-literal=deny=1", "--dry-run=server"); err == nil ||
		!strings.Contains(errOut, "denied the request") {
		t.Errorf("a dry run of a refused ConfigMap: %v\n%s", err, errOut)
	}
	// The pods a Deployment's controllers make pass the mutating webhook too.
	b.kubectl.ok(t, "-n", "hooked", "create", "deployment", "sleeper", "--image="+b.busybox, "--", "sleep", "3600")
	waitFor(t, 60*time.Second, "the Deployment's pod, labelled by the webhook", func() bool {
		out, _, err := b.kubectl.run("", "-n", "hooked", "get", "pods", "-l", "app=sleeper", "-o", "jsonpath={.items[*].metadata.labels.webhook}")
		return err == nil && out == "seen"
	})

	// The webhook's pod gone: failurePolicy Fail refuses at once.
	b.kubectl.ok(t, "-n", "hooks", "delete", "pod", "hook", "--grace-period=1", "--wait=true")
	start := time.Now()
	_, errOut, err = b.kubectl.run("", "-n", "hooked", "create", "configmap", "nobody-home", "--from-literal=a=1")
	if took := time.Since(start); err == nil || !strings.Contains(errOut, `failed calling webhook "`) || took > 20*time.Second {
		t.Errorf("a ConfigMap while the webhook is down: %v after %v\n%s", err, took, errOut)
	}
	// The configurations are never sent to webhooks: they can be removed.
	b.kubectl.ok(t, "delete", "validatingwebhookconfiguration", "isle-e2e-deny")
	b.kubectl.ok(t, "delete", "mutatingwebhookconfiguration", "isle-e2e-label")
	waitFor(t, 10*time.Second, "creates without the webhooks", func() bool {
		_, _, err := b.kubectl.run("", "-n", "hooked", "create", "configmap", "after", "--from-literal=deny=1")
		return err == nil
	})
	b.kubectl.ok(t, "delete", "namespace", "hooked", "hooks", "--wait=false")
}

// webhookCerts makes a CA and a serving certificate of it for name.
func webhookCerts(t *testing.T, name string) (caPEM, certPEM, keyPEM string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "isle e2e webhook CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
}
