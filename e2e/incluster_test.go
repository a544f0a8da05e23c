package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/node/containers/ctrtest"
)

// inClusterTools are the programs of e2e/incluster (a module of its own:
// controller-runtime and Helm come from the Go module proxy at the
// versions its go.mod pins), built in the background.
type inClusterTools struct {
	done             chan struct{}
	operator, helm   string
	metricsServerDir string // the metrics-server module, holding its chart
	err              error
}

// metricsServer is the module whose chart the test installs: a public
// chart with RBAC (ClusterRoles, one aggregated to view, bindings in two
// namespaces), as a homelab installs it.
const metricsServer = "sigs.k8s.io/metrics-server@v0.8.0"

// buildInClusterTools starts building the operator and helm (static)
// into dir and fetching the chart's module; wait waits for them.
func buildInClusterTools(dir string) *inClusterTools {
	b := &inClusterTools{done: make(chan struct{}), operator: filepath.Join(dir, "operator"), helm: filepath.Join(dir, "helm")}
	go func() {
		defer close(b.done)
		b.err = b.build(dir)
	}()
	return b
}

func (b *inClusterTools) wait() error {
	<-b.done
	return b.err
}

func (b *inClusterTools) build(dir string) error {
	_, here, _, _ := runtime.Caller(0)
	mod := filepath.Join(filepath.Dir(here), "incluster")
	for _, c := range [][]string{
		{"build", "-trimpath", "-ldflags", "-s -w", "-o", b.operator, "./operator"},
		{"build", "-trimpath", "-ldflags", "-s -w", "-o", b.helm, "helm.sh/helm/v4/cmd/helm"},
	} {
		cmd := exec.Command("go", c...)
		cmd.Dir, cmd.Env = mod, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s in e2e/incluster: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	// Outside any module: the chart's module alone, checked against the
	// checksum database.
	cmd := exec.Command("go", "mod", "download", "-json", metricsServer)
	cmd.Dir = dir
	out, err := cmd.Output()
	var m struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &m)
	}
	if err != nil || m.Error != "" || m.Dir == "" {
		return fmt.Errorf("go mod download %s: %v %s", metricsServer, err, m.Error)
	}
	b.metricsServerDir = m.Dir
	return nil
}

// helmRunner returns a function running Helm (server-side apply, Helm 4's
// default) as the island's administrator, with a HOME of its own.
func (b *inClusterTools) helmRunner(t *testing.T, pb *podBoard) func(args ...string) (string, error) {
	home := t.TempDir()
	return func(args ...string) (string, error) {
		cmd := exec.Command(b.helm, append([]string{"--kubeconfig", pb.kubectl.kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// helmLifecycle installs, upgrades and rolls back the chart `helm create`
// writes, with Helm 4's server-side apply: the objects and their field
// managers follow each revision.
func helmLifecycle(t *testing.T, b *podBoard, tools *inClusterTools) {
	if err := tools.wait(); err != nil {
		t.Fatal(err)
	}
	helm := tools.helmRunner(t, b)
	dir := t.TempDir()
	if out, err := helm("create", filepath.Join(dir, "web")); err != nil {
		t.Fatalf("helm create: %v\n%s", err, out)
	}
	chart := filepath.Join(dir, "web")
	k := b.kubectl
	replicas := func() string {
		return k.ok(t, "-n", "charts", "get", "deploy", "web", "-o", "jsonpath={.spec.replicas} {.metadata.labels.app\\.kubernetes\\.io/instance}")
	}
	if out, err := helm("install", "web", chart, "--namespace", "charts", "--create-namespace"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	if got := replicas(); got != "1 web" {
		t.Fatalf("after install: %q", got)
	}
	mustMatch(t, "managed by Helm's server-side apply", k.ok(t, "-n", "charts", "get", "deploy", "web", "--show-managed-fields", "-o", "jsonpath={.metadata.managedFields[*].manager} {.metadata.managedFields[*].operation}"),
		`\bhelm\b.*\bApply\b`)
	if out, err := helm("upgrade", "web", chart, "--namespace", "charts", "--set", "replicaCount=3"); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	if got := replicas(); got != "3 web" {
		t.Fatalf("after upgrade: %q", got)
	}
	if out, err := helm("rollback", "web", "1", "--namespace", "charts"); err != nil {
		t.Fatalf("helm rollback: %v\n%s", err, out)
	}
	if got := replicas(); got != "1 web" {
		t.Fatalf("after rollback: %q", got)
	}
	out, err := helm("history", "web", "--namespace", "charts")
	if err != nil {
		t.Fatalf("helm history: %v\n%s", err, out)
	}
	mustMatch(t, "helm history", out, `(?m)^1\s.*superseded`, `(?m)^2\s.*superseded`, `(?m)^3\s.*deployed\s.*Rollback to 1`)
	if out, err := helm("uninstall", "web", "--namespace", "charts"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}

	// A chart with its CRD in crds/ and an object of it in templates/.
	crdChart := filepath.Join(dir, "widgets")
	for name, text := range widgetChart {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(crdChart, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(crdChart, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := helm("install", "widgets", crdChart, "--namespace", "charts"); err != nil {
		t.Fatalf("helm install of a chart with a CRD: %v\n%s", err, out)
	}
	mustMatch(t, "the chart's object, defaulted", k.ok(t, "-n", "charts", "get", "widgets", "first", "-o", "jsonpath={.spec.color}/{.spec.size}"), "^blue/3$")
	if out, err := helm("upgrade", "widgets", crdChart, "--namespace", "charts", "--set", "color=red"); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	mustMatch(t, "after the upgrade", k.ok(t, "-n", "charts", "get", "widget", "first", "-o", "jsonpath={.spec.color}"), "^red$")
	if out, err := helm("uninstall", "widgets", "--namespace", "charts"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	// Helm keeps a chart's CRDs when it uninstalls it.
	k.ok(t, "get", "crd", "widgets.charts.isle.dev")
}

// widgetChart is a chart with a CRD in crds/, as operators' charts ship
// theirs.
var widgetChart = map[string]string{
	"Chart.yaml":  "apiVersion: v2\nname: widgets\nversion: 0.1.0\n",
	"values.yaml": "color: blue\n",
	"crds/widgets.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.charts.isle.dev}
spec:
  group: charts.isle.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string, enum: [blue, red]}
              size: {type: integer, default: 3}
`,
	"templates/widget.yaml": `apiVersion: charts.isle.dev/v1
kind: Widget
metadata: {name: first}
spec: {color: {{ .Values.color }}}
`,
}

// operatorChart is the chart the test writes: the operator as a chart
// ships one (a ServiceAccount, a Role and its RoleBinding, a ClusterRole
// and its ClusterRoleBinding, a Deployment).
var operatorChart = map[string]string{
	"Chart.yaml": `apiVersion: v2
name: isle-operator
description: The in-cluster operator of isle's e2e tests
version: 0.1.0
`,
	"values.yaml": "image: \"\"\n",
	"templates/rbac.yaml": `apiVersion: v1
kind: ServiceAccount
metadata: {name: {{ .Release.Name }}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: {{ .Release.Name }}}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, update, patch]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: {{ .Release.Name }}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: {{ .Release.Name }}}
subjects: [{kind: ServiceAccount, name: {{ .Release.Name }}, namespace: {{ .Release.Namespace }}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: {{ .Release.Name }}-nodes}
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: {{ .Release.Name }}-nodes}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {{ .Release.Name }}-nodes}
subjects: [{kind: ServiceAccount, name: {{ .Release.Name }}, namespace: {{ .Release.Namespace }}}]
`,
	"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}}
spec:
  replicas: 1
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec:
      serviceAccountName: {{ .Release.Name }}
      containers:
      - name: operator
        image: {{ .Values.image }}
        env:
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
`,
}

// inClusterOperator installs the operator's chart with Helm, sees the
// operator take its Lease and reconcile with its pod's service-account
// token, then deletes its RoleBinding: the operator is refused and says
// so. Then Helm installs metrics-server's public chart with its RBAC.
func inClusterOperator(t *testing.T, b *podBoard, tools *inClusterTools) {
	if err := tools.wait(); err != nil {
		t.Fatal(err)
	}
	img := ctrtest.Busybox(t)
	bin, err := os.ReadFile(tools.operator)
	if err != nil {
		t.Fatal(err)
	}
	img.Files["/usr/bin/operator"] = ctrtest.File{Data: bin, Mode: 0o755}
	img.Entrypoint, img.Cmd = []string{"/usr/bin/operator"}, nil
	ref := b.isl.image(ctrtest.Push(t, b.isl.state.RegistryAddr(), "isle/operator:1", img, nil))

	chart := t.TempDir()
	for name, text := range operatorChart {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(chart, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(chart, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	helm := tools.helmRunner(t, b)
	if out, err := helm("install", "op", chart, "--namespace", "op", "--create-namespace", "--set", "image="+ref); err != nil {
		t.Fatalf("helm install of the operator's chart: %v\n%s", err, out)
	}
	k := b.kubectl
	pod := ""
	waitFor(t, 90*time.Second, "the operator's pod Running", func() bool {
		out, _, err := k.run("", "-n", "op", "get", "pods", "-l", "app=op", "-o", "jsonpath={.items[0].metadata.name} {.items[0].status.phase}")
		name, phase, _ := strings.Cut(out, " ")
		pod = name
		return err == nil && phase == "Running"
	})
	logs := func(previous bool) string {
		args := []string{"-n", "op", "logs", pod}
		if previous {
			args = append(args, "--previous")
		}
		out, _, _ := k.run("", args...)
		return out
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the operator's log:\n%s\nbefore its restart:\n%s", logs(false), logs(true))
		}
	})
	waitFor(t, 60*time.Second, "the operator elected (its Lease taken)", func() bool { return strings.Contains(logs(false), "elected: the leader") })
	mustMatch(t, "the Lease", k.ok(t, "-n", "op", "get", "lease", "isle-operator", "-o", "jsonpath={.spec.holderIdentity}"), "^"+pod)

	// It reconciles: a ConfigMap asked gets its answer, counting the
	// nodes it reads through its ClusterRole.
	k.ok(t, "-n", "op", "create", "configmap", "question", "--from-literal=q=who")
	k.ok(t, "-n", "op", "label", "configmap", "question", "isle.dev/ask=yes")
	want := "seen by " + pod + "; 1 nodes"
	waitFor(t, 30*time.Second, "the operator's answer", func() bool {
		out, _, _ := k.run("", "-n", "op", "get", "configmap", "question", "-o", "jsonpath={.data.answer}")
		return out == want
	})
	sa := "--as=system:serviceaccount:op:op"
	for _, c := range []struct{ args, want string }{
		{"update configmaps -n op", "yes"}, {"update configmaps -n default", "no"},
		{"list nodes", "yes"}, {"delete nodes", "no"}, {"list secrets -n op", "no"},
	} {
		out, _, _ := k.run("", append(append([]string{"auth", "can-i"}, strings.Fields(c.args)...), sa)...)
		if strings.TrimSpace(out) != c.want {
			t.Errorf("can-i %s as the operator: %q, want %s", c.args, out, c.want)
		}
	}

	// Its RoleBinding deleted: refused at its next Lease renewal, it says
	// so and stops.
	k.ok(t, "-n", "op", "delete", "rolebinding", "op")
	// (client-go's leader election logs through controller-runtime's
	// JSON logger: its quotes escaped.)
	refused := regexp.MustCompile(`leases.coordination.k8s.io \\?"isle-operator\\?" is forbidden: User \\?"system:serviceaccount:op:op\\?" cannot (get|update) resource \\?"leases\\?"` +
		`(?s).*"stopping".*leader election lost`)
	waitFor(t, 90*time.Second, "the operator refused and saying so", func() bool {
		return refused.MatchString(logs(false)) || refused.MatchString(logs(true))
	})

	if out, err := helm("uninstall", "op", "--namespace", "op"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	waitFor(t, 30*time.Second, "the chart's RBAC objects gone", func() bool {
		_, _, errRole := k.run("", "-n", "op", "get", "role", "op")
		_, _, errCR := k.run("", "get", "clusterrole", "op-nodes")
		return errRole != nil && errCR != nil
	})

	// A public chart with RBAC: metrics-server's, without its APIService
	// (the aggregation layer is not served).
	msChart := filepath.Join(tools.metricsServerDir, "charts", "metrics-server")
	if out, err := helm("install", "metrics-server", msChart, "--namespace", "kube-system", "--set", "apiService.create=false"); err != nil {
		t.Fatalf("helm install of %s's chart: %v\n%s", metricsServer, err, out)
	}
	k.ok(t, "get", "clusterrole", "system:metrics-server", "system:metrics-server-aggregated-reader")
	k.ok(t, "get", "clusterrolebinding", "metrics-server:system:auth-delegator")
	k.ok(t, "-n", "kube-system", "get", "rolebinding/metrics-server-auth-reader", "serviceaccount/metrics-server")
	// Its aggregated reader joins view, so a viewer reads pod metrics.
	k.ok(t, "create", "rolebinding", "viewers", "--clusterrole=view", "--group=viewers", "-n", "default")
	waitFor(t, 10*time.Second, "view aggregates the chart's reader", func() bool {
		out, _, _ := k.run("", "auth", "can-i", "list", "pods.metrics.k8s.io", "-n", "default", "--as=viewer", "--as-group=viewers")
		return strings.TrimSpace(out) == "yes"
	})
	if out, err := helm("uninstall", "metrics-server", "--namespace", "kube-system"); err != nil {
		t.Fatalf("helm uninstall metrics-server: %v\n%s", err, out)
	}
}
