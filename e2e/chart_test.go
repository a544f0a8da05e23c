package e2e

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/node/netns"
)

// dbChart is a chart as charts of databases are: a StatefulSet with a
// claim per replica behind a headless Service, a PodDisruptionBudget and
// a NetworkPolicy letting in only the pods labelled as its clients. Each
// kind is there only if the cluster serves it, as such charts test
// (.Capabilities.APIVersions.Has): a cluster that does not drops it.
var dbChart = map[string]string{
	"Chart.yaml":  "apiVersion: v2\nname: db\nversion: 0.1.0\n",
	"values.yaml": "replicas: 3\nminAvailable: 1\nimage: hello\n",
	"templates/service.yaml": `apiVersion: v1
kind: Service
metadata: {name: {{ .Release.Name }}}
spec:
  clusterIP: None
  selector: {app: {{ .Release.Name }}}
  ports: [{name: http, port: 8080}]
`,
	"templates/statefulset.yaml": `{{- if .Capabilities.APIVersions.Has "apps/v1/StatefulSet" }}
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: {{ .Release.Name }}}
spec:
  replicas: {{ .Values.replicas }}
  serviceName: {{ .Release.Name }}
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: db
        image: {{ .Values.image }}
        ports: [{name: http, containerPort: 8080}]
        readinessProbe: {httpGet: {path: /healthz, port: http}, periodSeconds: 1}
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Mi}}
{{- end }}
`,
	"templates/pdb.yaml": `{{- if .Capabilities.APIVersions.Has "policy/v1/PodDisruptionBudget" }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: {{ .Release.Name }}}
spec:
  minAvailable: {{ .Values.minAvailable }}
  selector: {matchLabels: {app: {{ .Release.Name }}}}
{{- end }}
`,
	"templates/networkpolicy.yaml": `{{- if .Capabilities.APIVersions.Has "networking.k8s.io/v1/NetworkPolicy" }}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: {{ .Release.Name }}}
spec:
  podSelector: {matchLabels: {app: {{ .Release.Name }}}}
  ingress:
  - from: [{podSelector: {matchLabels: {{ printf "{%s-client: \"true\"}" .Release.Name }}}}]
    ports: [{port: http}]
{{- end }}
`,
}

// helmStatefulChart installs dbChart with Helm 4 (waiting for it to be
// ready), checks that every kind is there and the budget and the policy
// do what they say, upgrades the budget and uninstalls it.
func helmStatefulChart(t *testing.T, b *podBoard, tools *inClusterTools) {
	if err := tools.wait(); err != nil {
		t.Fatal(err)
	}
	helm := tools.helmRunner(t, b)
	chart := filepath.Join(t.TempDir(), "db")
	for name, text := range dbChart {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(chart, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(chart, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k := b.kubectl
	if out, err := helm("install", "db", chart, "--namespace", "db", "--create-namespace", "--set", "image="+b.hello,
		"--wait", "--timeout", "3m"); err != nil {
		t.Fatalf("helm install --wait: %v\n%s", err, out)
	}
	defer k.run("", "delete", "namespace", "db", "--wait=false")
	mustMatch(t, "the chart's objects", k.ok(t, "-n", "db", "get", "sts,pdb,netpol,svc,pvc", "-o", "name"),
		`statefulset.apps/db\n`, `poddisruptionbudget.policy/db\n`, `networkpolicy.networking.k8s.io/db\n`, `service/db\n`,
		`persistentvolumeclaim/data-db-0\n`, `persistentvolumeclaim/data-db-2\n`)
	mustMatch(t, "the StatefulSet, ready", k.ok(t, "-n", "db", "get", "sts", "db", "-o", "jsonpath={.status.readyReplicas}"), "^3$")
	waitFor(t, 30*time.Second, "the budget to allow 2 disruptions", func() bool {
		return k.ok(t, "-n", "db", "get", "pdb", "db", "-o", "jsonpath={.status.disruptionsAllowed}") == "2"
	})

	// The policy: a client labelled db-client reaches db-0, another not.
	k.ok(t, "-n", "db", "run", "client", "--image", b.busybox, "--labels", "db-client=true", "--restart", "Never", "--", "sleep", "3600")
	k.ok(t, "-n", "db", "run", "stranger", "--image", b.busybox, "--restart", "Never", "--", "sleep", "3600")
	pod := func(name string) *corev1.Pod {
		var p corev1.Pod
		waitFor(t, 60*time.Second, "pod db/"+name+" running with an IP", func() bool {
			out, _, err := k.run("", "-n", "db", "get", "pod", name, "-o", "json")
			return err == nil && json.Unmarshal([]byte(out), &p) == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
		})
		return &p
	}
	db0 := pod("db-0")
	connects := func(from string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := netns.Dialer(b.isl.podNetns(pod(from)))(ctx, "tcp", net.JoinHostPort(db0.Status.PodIP, "8080"))
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	// The boards learn of a new pod's address through their informers: the
	// client gets in once its board's rules have it.
	waitFor(t, 20*time.Second, "the chart's client to reach db-0", func() bool { return connects("client") })
	if connects("stranger") {
		t.Error("a pod not labelled db-client reached db-0 through the chart's NetworkPolicy")
	}

	if out, err := helm("upgrade", "db", chart, "--namespace", "db", "--reuse-values", "--set", "minAvailable=2"); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	waitFor(t, 30*time.Second, "the budget to allow 1 disruption", func() bool {
		return k.ok(t, "-n", "db", "get", "pdb", "db", "-o", "jsonpath={.status.disruptionsAllowed}") == "1"
	})
	if out, err := helm("uninstall", "db", "--namespace", "db", "--wait"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	// The claims stay, as a StatefulSet's do.
	out := k.ok(t, "-n", "db", "get", "sts,pdb,netpol,pvc", "-o", "name")
	if strings.Contains(out, "statefulset") || strings.Contains(out, "poddisruptionbudget") || strings.Contains(out, "networkpolicy") ||
		!strings.Contains(out, "persistentvolumeclaim/data-db-0") {
		t.Errorf("after helm uninstall: %q, want the claims alone", out)
	}
}
