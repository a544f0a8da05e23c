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
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodeProbes is what a node's credential was found to reach beyond its
// own pods (issue 23), tried again on a running cluster: each answers 403,
// and the node's own reads and writes still work.
func nodeProbes(t *testing.T, bin string, c *storeCluster) {
	admin := adminClient(t, bin, c.members[0])
	node := admin.withToken(nodeToken(t, admin, c.members[0], "pi9"))
	post := func(cl *apiClient, path, body string) (int, string) {
		code, b, _ := cl.do(t, "POST", path, "application/json", []byte(body))
		return code, b
	}
	patch := func(cl *apiClient, path, body string) (int, string) {
		code, b, _ := cl.do(t, "PATCH", path, "application/merge-patch+json", []byte(body))
		return code, b
	}
	get := func(cl *apiClient, path string) (int, string) {
		code, b, _ := cl.do(t, "GET", path, "", nil)
		return code, b
	}
	must := func(what string, code int, body string, want int) {
		t.Helper()
		if code != want {
			t.Fatalf("%s: %d, want %d: %s", what, code, want, body)
		}
	}
	// pi9's pod uses Secret probe-mine; probe-other is nobody's; a pod
	// of pi1's to read the logs of.
	for _, s := range []string{"probe-mine", "probe-other"} {
		code, b := post(admin, "/api/v1/namespaces/default/secrets", `{"metadata":{"name":"`+s+`"},"stringData":{"k":"v"}}`)
		must("create Secret "+s, code, b, 201)
	}
	code, b := post(admin, "/api/v1/namespaces/default/pods", `{"metadata":{"name":"probe-pi9"},"spec":{"nodeName":"pi9","containers":[{"name":"c","image":"busybox"}],`+
		`"volumes":[{"name":"s","secret":{"secretName":"probe-mine"}}]}}`)
	must("create pi9's pod", code, b, 201)
	code, b = post(admin, "/api/v1/namespaces/default/pods", `{"metadata":{"name":"probe-pi1"},"spec":{"nodeName":"pi1","containers":[{"name":"c","image":"busybox"}]}}`)
	must("create pi1's pod", code, b, 201)
	code, b = post(node, "/api/v1/nodes", `{"metadata":{"name":"pi9","labels":{"kubernetes.io/hostname":"pi9","isle.dev/role":"agent"}}}`)
	must("pi9 registers its Node", code, b, 201)
	waitFor(t, 20*time.Second, "pi9 gets a pod CIDR", func() bool {
		_, b := get(admin, "/api/v1/nodes/pi9")
		return strings.Contains(b, `"podCIDR":"10.42.`)
	})
	code, b = patch(admin, "/api/v1/nodes/pi9", `{"spec":{"taints":[{"key":"dedicated","value":"lab","effect":"NoSchedule"}]}}`)
	must("an administrator taints pi9", code, b, 200)
	_, pi1 := get(admin, "/api/v1/nodes/pi1")
	pi1CIDR := between(pi1, `"podCIDR":"`, `"`)
	waitFor(t, 10*time.Second, "pi9 may read its pod's Secret", func() bool {
		code, _ := get(node, "/api/v1/namespaces/default/secrets/probe-mine")
		return code == 200
	})

	probes := []struct {
		name string
		do   func() (int, string)
		want string
	}{
		{"list every Secret", func() (int, string) { return get(node, "/api/v1/secrets") }, "can only get individual resources of this type"},
		{"get a Secret no pod of it uses", func() (int, string) { return get(node, "/api/v1/namespaces/default/secrets/probe-other") },
			"no relationship found between node 'pi9' and this object"},
		{"list every ConfigMap", func() (int, string) { return get(node, "/api/v1/configmaps") }, "can only get individual resources of this type"},
		{"read another node's pod's log", func() (int, string) { return get(node, "/api/v1/namespaces/default/pods/probe-pi1/log") },
			`cannot get resource \"pods/log\"`},
		{"label itself another node's hostname", func() (int, string) {
			return patch(node, "/api/v1/nodes/pi9", `{"metadata":{"labels":{"kubernetes.io/hostname":"pi1"}}}`)
		}, "may only set kubernetes.io/hostname to its own name"},
		{"label itself node-restriction.kubernetes.io/", func() (int, string) {
			return patch(node, "/api/v1/nodes/pi9", `{"metadata":{"labels":{"node-restriction.kubernetes.io/pool":"gpu"}}}`)
		}, "not allowed to modify labels: node-restriction.kubernetes.io/pool"},
		{"remove the administrator's taint", func() (int, string) { return patch(node, "/api/v1/nodes/pi9", `{"spec":{"taints":null}}`) },
			"not allowed to modify taints"},
		{"take another node's pod CIDR", func() (int, string) {
			return patch(node, "/api/v1/nodes/pi9", fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, pi1CIDR, pi1CIDR))
		}, "may not change podCIDR"}, // validation refuses it before NodeRestriction would (422)
		{"say it is a control-plane server", func() (int, string) {
			return patch(node, "/api/v1/nodes/pi9", `{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`)
		}, "not a server of the control plane"},
		{"write another node's status", func() (int, string) {
			return patch(node, "/api/v1/nodes/pi1/status", `{"status":{"conditions":[{"type":"Ready","status":"False"}]}}`)
		}, "node 'pi9' cannot modify node 'pi1'"},
		{"delete another node's pod", func() (int, string) {
			code, b, _ := node.do(t, "DELETE", "/api/v1/namespaces/default/pods/probe-pi1", "", nil)
			return code, b
		}, "no relationship found"},
		{"read the RBAC policy", func() (int, string) { return get(node, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings") }, `cannot list resource \"clusterrolebindings\"`},
	}
	for _, p := range probes {
		code, b := p.do()
		if code != http.StatusForbidden && code != http.StatusUnprocessableEntity || !strings.Contains(b, p.want) {
			t.Errorf("node pi9: %s: %d %s, want 403 (or 422) with %q", p.name, code, b, p.want)
		} else {
			t.Logf("node pi9: %s: %d %s", p.name, code, between(b, `"message":"`, `","reason"`))
		}
	}
	// What it may do still works.
	for _, ok := range []struct {
		name string
		do   func() (int, string)
		want int
	}{
		{"read its pod's Secret", func() (int, string) { return get(node, "/api/v1/namespaces/default/secrets/probe-mine") }, 200},
		{"list the pods", func() (int, string) { return get(node, "/api/v1/pods?fieldSelector=spec.nodeName%3Dpi9") }, 200},
		{"label itself", func() (int, string) {
			return patch(node, "/api/v1/nodes/pi9", `{"metadata":{"labels":{"disk":"ssd"}}}`)
		}, 200},
		{"write its pod's status", func() (int, string) {
			return patch(node, "/api/v1/namespaces/default/pods/probe-pi9/status", `{"status":{"phase":"Running"}}`)
		}, 200},
	} {
		if code, b := ok.do(); code != ok.want {
			t.Errorf("node pi9: %s: %d %s, want %d", ok.name, code, b, ok.want)
		}
	}
	_, b = get(admin, "/api/v1/nodes/pi9")
	if !strings.Contains(b, `"kubernetes.io/hostname":"pi9"`) || !strings.Contains(b, `"dedicated"`) || strings.Contains(b, pi1CIDR) {
		t.Errorf("pi9's Node after the probes: %s", b)
	}
	for _, p := range []string{"pods/probe-pi9", "pods/probe-pi1", "secrets/probe-mine", "secrets/probe-other"} {
		admin.do(t, "DELETE", "/api/v1/namespaces/default/"+p+"?gracePeriodSeconds=0", "", nil)
	}
	admin.do(t, "DELETE", "/api/v1/nodes/pi9", "", nil)
}

// between is what s holds between the first from and the next to.
func between(s, from, to string) string {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, to)
	return v
}

// canIMatrix is `kubectl auth can-i` for each kind of user, in two
// namespaces, through impersonation (--as, --as-group): the bootstrap
// policy's admin, edit and view bound in team-a, a student who is admin of
// team-b only, a node and a service account.
// The namespaces are team-a-SFX and team-b-SFX.
func canIMatrix(t *testing.T, k *kubectlRunner, sfx string) {
	teamA, teamB := "team-a-"+sfx, "team-b-"+sfx
	for _, ns := range []string{teamA, teamB} {
		k.ok(t, "create", "namespace", ns)
	}
	t.Cleanup(func() { k.run("", "delete", "namespace", teamA, teamB, "--wait=false") })
	k.ok(t, "create", "rolebinding", "alice-admin", "-n", teamA, "--clusterrole=admin", "--user=alice")
	k.ok(t, "create", "rolebinding", "bob-edit", "-n", teamA, "--clusterrole=edit", "--user=bob")
	k.ok(t, "create", "rolebinding", "carol-view", "-n", teamA, "--clusterrole=view", "--user=carol")
	k.ok(t, "create", "rolebinding", "student", "-n", teamB, "--clusterrole=admin", "--group=students")
	k.ok(t, "create", "role", "pod-reader", "-n", teamA, "--verb=get,list,watch", "--resource=pods")
	k.ok(t, "create", "rolebinding", "robot", "-n", teamA, "--role=pod-reader", "--serviceaccount="+teamA+":robot")

	type user struct{ name, as, group string }
	users := []user{
		{"admin", "", ""}, {"alice (admin)", "alice", ""}, {"bob (edit)", "bob", ""}, {"carol (view)", "carol", ""},
		{"dave (student)", "dave", "students"}, {"node pi1", "system:node:pi1", "system:nodes"}, {"sa team-a/robot", "system:serviceaccount:" + teamA + ":robot", ""},
	}
	checks := []struct{ verb, resource, ns string }{
		{"list", "pods", teamA}, {"create", "deployments.apps", teamA}, {"get", "secrets", teamA},
		{"create", "rolebindings.rbac.authorization.k8s.io", teamA}, {"list", "pods", teamB}, {"delete", "pods", teamB},
		{"list", "nodes", ""}, {"create", "clusterroles.rbac.authorization.k8s.io", ""},
	}
	want := map[string]string{ // one letter a check: y or n
		"admin":           "yyyyyyyy",
		"alice (admin)":   "yyyynnnn",
		"bob (edit)":      "yyynnnnn",
		"carol (view)":    "ynnnnnnn",
		"dave (student)":  "nnnnyynn",
		"node pi1":        "ynnnynyn",
		"sa team-a/robot": "ynnnnnnn",
	}
	canI := func(u user, verb, resource, ns string) string {
		args := []string{"auth", "can-i", verb, resource}
		if ns != "" {
			args = append(args, "-n", ns)
		}
		if u.as != "" {
			args = append(args, "--as", u.as)
		}
		if u.group != "" {
			args = append(args, "--as-group", u.group)
		}
		out, _, _ := k.run("", args...)
		if strings.TrimSpace(out) == "yes" {
			return "y"
		}
		return "n"
	}
	// The bindings reach every server's authorizer within moments.
	waitFor(t, 10*time.Second, "alice may list pods in team-a", func() bool { return canI(users[1], "list", "pods", teamA) == "y" })
	var table strings.Builder
	fmt.Fprintf(&table, "%-18s", "")
	for _, c := range checks {
		fmt.Fprintf(&table, " %s %s %s |", c.verb, strings.Split(c.resource, ".")[0], strings.TrimSuffix(c.ns, "-"+sfx))
	}
	for _, u := range users {
		got := ""
		for _, c := range checks {
			got += canI(u, c.verb, c.resource, c.ns)
		}
		fmt.Fprintf(&table, "\n%-18s %s", u.name, got)
		if got != want[u.name] {
			t.Errorf("can-i of %s: %s, want %s", u.name, got, want[u.name])
		}
	}
	t.Logf("kubectl auth can-i:\n%s", table.String())
	// --list: what alice holds in team-a.
	mustMatch(t, "auth can-i --list", k.ok(t, "auth", "can-i", "--list", "-n", teamA, "--as", "alice"),
		`(?m)^rolebindings\.rbac\.authorization\.k8s\.io\s+\[\]\s+\[\]\s+\[create delete deletecollection get list patch update watch\]`)
	// Escalation, through kubectl: alice may not bind cluster-admin.
	_, errOut, err := k.run("", "create", "rolebinding", "root", "-n", teamA, "--clusterrole=cluster-admin", "--user=alice", "--as", "alice")
	if err == nil || !strings.Contains(errOut, "is attempting to grant RBAC permissions not currently held") {
		t.Errorf("alice binds cluster-admin: %v %s", err, errOut)
	}
}

// userAccounts is a classroom's day: isle user add gives a student a
// kubeconfig that reaches the student's namespace alone; isle user list
// shows it; isle user revoke ends it at once.
func userAccounts(t *testing.T, bin string, c *storeCluster) {
	m := c.members[0]
	isle := func(args ...string) (string, error) {
		out, err := exec.Command(bin, append(args, "--socket", m.adminSocket)...).CombinedOutput()
		return string(out), err
	}
	kc := filepath.Join(t.TempDir(), "alice.kubeconfig")
	if out, err := isle("user", "add", "alice", "--group", "students", "--namespace", "class-alice", "--role", "edit", "--ttl", "24h", "-o", kc); err != nil {
		t.Fatalf("isle user add: %v\n%s", err, out)
	}
	if fi, err := os.Stat(kc); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the kubeconfig: %v %v", fi, err)
	}
	if out, err := isle("user", "add", "alice"); err == nil || !strings.Contains(out, `user "alice" exists`) {
		t.Errorf("adding alice again: %v %s", err, out)
	}
	if out, err := isle("user", "add", "system:admin"); err == nil || !strings.Contains(out, "name \"system:admin\"") {
		t.Errorf("a system: name: %v %s", err, out)
	}
	if out, err := isle("user", "add", "mallory", "--group", "system:nodes"); err == nil || !strings.Contains(out, "the system: groups are Kubernetes' own") {
		t.Errorf("a system: group: %v %s", err, out)
	}
	out, err := isle("user", "list")
	if err != nil {
		t.Fatalf("isle user list: %v %s", err, out)
	}
	mustMatch(t, "isle user list", out, `NAME +GROUPS +NAMESPACE +ROLE +EXPIRES`, `alice +students +class-alice +edit +\d{4}-`)

	alice := &kubectlRunner{bin: kubectlBin(t), home: t.TempDir(), kubeconfig: kc}
	waitFor(t, 10*time.Second, "alice may create a deployment in class-alice", func() bool {
		out, _, _ := alice.run("", "auth", "can-i", "create", "deployments")
		return strings.TrimSpace(out) == "yes"
	})
	alice.ok(t, "create", "configmap", "notes", "--from-literal=a=b") // the kubeconfig's namespace
	mustMatch(t, "alice whoami", alice.ok(t, "auth", "whoami"), `Username +alice`, `Groups +\[students system:authenticated\]`)
	if _, errOut, err := alice.run("", "get", "pods", "-n", "default"); err == nil || !strings.Contains(errOut, `User "alice" cannot list resource "pods" in API group "" in the namespace "default"`) {
		t.Errorf("alice lists pods in default: %v %s", err, errOut)
	}
	if out, err := isle("user", "revoke", "alice"); err != nil {
		t.Fatalf("isle user revoke: %v %s", err, out)
	}
	if _, errOut, err := alice.run("", "get", "configmaps"); err == nil || !strings.Contains(errOut, "Unauthorized") {
		t.Errorf("alice after her revocation: %v %s", err, errOut)
	}
	if out, err := isle("user", "revoke", "alice"); err == nil || !strings.Contains(out, `no user "alice"`) {
		t.Errorf("revoking alice twice: %v %s", err, out)
	}
}

// csrFlow is a person's certificate through the API, as kubeadm-less
// clusters document it: a CertificateSigningRequest of the
// kube-apiserver-client signer, `kubectl certificate approve`, the
// certificate issued by the control plane, and kubectl working with it.
func csrFlow(t *testing.T, bin string, c *storeCluster) {
	k := newKubectl(t, bin, c.members[0])
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "erin", Organization: []string{"teachers"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	req := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	manifest := `apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: erin
spec:
  request: ` + req + `
  signerName: kubernetes.io/kube-apiserver-client
  expirationSeconds: 86400
  usages: [client auth]
`
	if out, errOut, err := k.run(manifest, "create", "-f", "-"); err != nil {
		t.Fatalf("create the CSR: %v %s %s", err, out, errOut)
	}
	mustMatch(t, "get csr", k.ok(t, "get", "csr", "erin"),
		`NAME +AGE +SIGNERNAME +REQUESTOR +REQUESTEDDURATION +CONDITION`, `erin +\S+ +kubernetes.io/kube-apiserver-client +isle-admin +24h +Pending`)
	// A bad request names the field.
	bad := strings.Replace(manifest, "name: erin", "name: bad", 1)
	bad = strings.Replace(bad, "usages: [client auth]", "usages: [client auth, flying]", 1)
	if _, errOut, err := k.run(bad, "create", "-f", "-"); err == nil || !strings.Contains(errOut, `spec.usages[1]: Unsupported value: "flying"`) {
		t.Errorf("a CSR with an unknown usage: %v %s", err, errOut)
	}
	mustMatch(t, "certificate approve", k.ok(t, "certificate", "approve", "erin"), `certificatesigningrequest.certificates.k8s.io/erin approved`)
	var certB64 string
	waitFor(t, 20*time.Second, "the certificate issued", func() bool {
		certB64 = k.ok(t, "get", "csr", "erin", "-o", "jsonpath={.status.certificate}")
		return certB64 != ""
	})
	mustMatch(t, "get csr after", k.ok(t, "get", "csr", "erin"), `erin +.* +Approved,Issued`)
	certPEM, err := base64.StdEncoding.DecodeString(certB64)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "erin.crt"), filepath.Join(dir, "erin.key")
	os.WriteFile(certFile, certPEM, 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	erin := &kubectlRunner{bin: k.bin, home: t.TempDir(), kubeconfig: filepath.Join(dir, "kubeconfig")}
	kcData, _ := os.ReadFile(k.kubeconfig)
	os.WriteFile(erin.kubeconfig, kcData, 0o600)
	erin.ok(t, "config", "set-credentials", "erin", "--client-certificate="+certFile, "--client-key="+keyFile)
	erin.ok(t, "config", "set-context", "--current", "--user=erin")
	mustMatch(t, "erin whoami", erin.ok(t, "auth", "whoami"), `Username +erin`, `Groups +\[teachers system:authenticated\]`)
	k.ok(t, "delete", "csr", "erin")
}

// serviceAccountToken is `kubectl create token` and the token as kubectl's
// credential, against every server (each derives the same signing key
// from the CA's), and the issuer's discovery documents.
func serviceAccountToken(t *testing.T, bin string, c *storeCluster) {
	k := newKubectl(t, bin, c.members[0])
	k.ok(t, "create", "serviceaccount", "bot")
	k.ok(t, "create", "rolebinding", "bot-view", "--clusterrole=view", "--serviceaccount=default:bot")
	token := strings.TrimSpace(k.ok(t, "create", "token", "bot", "--duration=1h"))
	for i, m := range c.members {
		bot := &kubectlRunner{bin: k.bin, home: t.TempDir(), kubeconfig: filepath.Join(t.TempDir(), "kubeconfig")}
		kc, _ := os.ReadFile(newKubectl(t, bin, m).kubeconfig)
		os.WriteFile(bot.kubeconfig, kc, 0o600)
		bot.ok(t, "config", "set-credentials", "bot", "--token="+token)
		bot.ok(t, "config", "set-context", "--current", "--user=bot")
		mustMatch(t, fmt.Sprintf("whoami through pi%d", i+1), bot.ok(t, "auth", "whoami"), `Username +system:serviceaccount:default:bot`,
			`Groups +\[system:serviceaccounts system:serviceaccounts:default system:authenticated\]`)
		waitFor(t, 10*time.Second, "bot may list pods", func() bool { _, _, err := bot.run("", "get", "pods"); return err == nil })
		if _, errOut, err := bot.run("", "get", "secrets"); err == nil || !strings.Contains(errOut, `cannot list resource "secrets"`) {
			t.Errorf("bot lists secrets through pi%d: %v %s", i+1, err, errOut)
		}
		mustMatch(t, "jwks", bot.ok(t, "get", "--raw", "/openid/v1/jwks"), `"alg":"ES256"`)
	}

	// A kubernetes.io/service-account-token Secret: filled by the
	// controller, its token the service account's until the service
	// account goes, taking the Secret with it.
	if out, errOut, err := k.run(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"bot-token","annotations":{"kubernetes.io/service-account.name":"bot"}},"type":"kubernetes.io/service-account-token"}`,
		"apply", "-f", "-"); err != nil {
		t.Fatalf("the token Secret: %v %s%s", err, out, errOut)
	}
	var legacy []byte
	waitFor(t, 10*time.Second, "the token Secret filled", func() bool {
		out, _, _ := k.run("", "get", "secret", "bot-token", "-o", "jsonpath={.data.token}")
		legacy, _ = base64.StdEncoding.DecodeString(out)
		return len(legacy) > 0
	})
	mustMatch(t, "the filled Secret", k.ok(t, "describe", "secret", "bot-token"), `kubernetes.io/service-account.uid: \S+`, `ca.crt:\s+\d+ bytes`, `namespace:\s+7 bytes`)
	withLegacy := &kubectlRunner{bin: k.bin, home: t.TempDir(), kubeconfig: filepath.Join(t.TempDir(), "kubeconfig")}
	kc, _ := os.ReadFile(k.kubeconfig)
	os.WriteFile(withLegacy.kubeconfig, kc, 0o600)
	withLegacy.ok(t, "config", "set-credentials", "legacy", "--token="+string(legacy))
	withLegacy.ok(t, "config", "set-context", "--current", "--user=legacy")
	mustMatch(t, "whoami with the Secret's token", withLegacy.ok(t, "auth", "whoami"), `Username +system:serviceaccount:default:bot`)
	k.ok(t, "delete", "serviceaccount", "bot")
	waitFor(t, 10*time.Second, "the token Secret deleted with its service account", func() bool {
		_, errOut, err := k.run("", "get", "secret", "bot-token")
		return err != nil && strings.Contains(errOut, "NotFound")
	})
	if _, errOut, err := withLegacy.run("", "auth", "whoami"); err == nil || !strings.Contains(errOut, "Unauthorized") {
		t.Errorf("the deleted Secret's token: %v %s", err, errOut)
	}
	k.ok(t, "delete", "rolebinding", "bot-view")
}
