package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const hpaManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx
        resources:
          requests: {cpu: 100m, memory: 64Mi}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: web
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1
  maxReplicas: 4
  metrics:
  - type: Resource
    resource:
      name: cpu
      target: {type: Utilization, averageUtilization: 50}
`

// TestTopAndHPA: kubectl top shows the usage the server's own board
// reports, and an HPA scales a Deployment from the usage of its pods,
// reported as the board would (no container runtime runs them yet).
func TestTopAndHPA(t *testing.T) {
	bin := isleBinary(t)
	c := startStore(t, bin, 1)
	m := c.members[0]
	admin := adminClient(t, bin, m)
	waitAPIReady(t, admin)
	k := newKubectl(t, bin, m)

	// The board's agent reports every 15 s, a reporting interval after it
	// registered its Node.
	top := regexp.MustCompile(`(?m)^pi1\s+(\d+)m\s+\d+%\s+(\d+)Mi\s+\d+%`)
	var out string
	waitFor(t, 45*time.Second, "kubectl top node shows pi1", func() bool {
		out, _, _ = k.run("", "top", "node")
		return top.MatchString(out)
	})
	if mi, _ := strconv.Atoi(top.FindStringSubmatch(out)[2]); mi <= 0 {
		t.Fatalf("pi1 uses no memory:\n%s", out)
	}
	mustMatch(t, "kubectl top node", out, `NAME\s+CPU\(cores\)\s+CPU\(%\)\s+MEMORY\(bytes\)\s+MEMORY\(%\)`)
	mustMatch(t, "kubectl api-resources", k.ok(t, "api-resources", "--api-group=metrics.k8s.io"),
		`(?m)^nodes\s+metrics.k8s.io/v1beta1\s+false\s+NodeMetrics$`, `(?m)^pods\s+metrics.k8s.io/v1beta1\s+true\s+PodMetrics$`)

	if stdout, stderr, err := k.run(hpaManifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s%s", err, stdout, stderr)
	}
	cs := kubeClient(t, k.kubeconfig)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go runBoundPods(ctx, cs)
	cred, err := os.ReadFile(filepath.Join(m.dir, "node-credential.json"))
	if err != nil {
		t.Fatal(err)
	}
	var nc struct {
		NodeToken string `json:"nodeToken"`
	}
	if err := json.Unmarshal(cred, &nc); err != nil || nc.NodeToken == "" {
		t.Fatalf("node credential: %v", err)
	}
	board := admin.withToken(nc.NodeToken)
	go reportPodUsage(ctx, board, cs, "pi1", "200m")

	// 200m of 100m requested is 400% of the 50% target: 4 replicas, the
	// most the HPA allows.
	waitFor(t, 90*time.Second, "the HPA scales the Deployment to 4", func() bool {
		d, err := cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && *d.Spec.Replicas == 4
	})
	waitFor(t, 30*time.Second, "kubectl get hpa shows the usage against the target", func() bool {
		out, _, _ = k.run("", "get", "hpa", "web")
		return regexp.MustCompile(`web\s+Deployment/web\s+cpu: 200%/50%\s+1\s+4\s+4`).MatchString(out)
	})
	out = k.ok(t, "describe", "hpa", "web")
	mustMatch(t, "kubectl describe hpa", out,
		`resource cpu on pods\s+\(as a percentage of request\):\s+200% \(200m\) / 50%`,
		`ScalingActive\s+True\s+ValidMetricFound\s+the HPA was able to successfully calculate a replica count from cpu resource utilization \(percentage of request\)`,
		`Normal\s+SuccessfulRescale\s+.*horizontal-pod-autoscaler\s+New size: 4; reason: cpu resource utilization \(percentage of request\) above target`)
	out = k.ok(t, "top", "pod", "-l", "app=web")
	mustMatch(t, "kubectl top pod", out, `(?m)^web-\S+\s+200m\s+30Mi`)

	// A board may report only its own pods.
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods: %v", err)
	}
	other := admin.withToken(nodeToken(t, admin, m, "pi9"))
	code, body, _ := other.do(t, "POST", "/isle/v1/stats", "application/json", usageReport("200m", pods.Items[:1]))
	if want := fmt.Sprintf(`node \"pi9\" may not report pod default/%s: it is bound to node \"pi1\"`, pods.Items[0].Name); code != http.StatusForbidden || !strings.Contains(body, want) {
		t.Fatalf("a report of another board's pod: %d %s", code, body)
	}
}

// runBoundPods marks the pods bound to a node Running and Ready until ctx
// ends, as a kubelet would once their containers run.
func runBoundPods(ctx context.Context, cs *kubernetes.Clientset) {
	for ctx.Err() == nil {
		list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range list.Items {
				p := &list.Items[i]
				if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodRunning {
					continue
				}
				now := metav1.Now()
				p.Status.Phase, p.Status.StartTime, p.Status.PodIP = corev1.PodRunning, &now, "10.42.0.9"
				p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now})
				_, _ = cs.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// reportPodUsage reports, as the board node every second, that each of
// its running pods uses cpu (and 30Mi), until ctx ends.
func reportPodUsage(ctx context.Context, board *apiClient, cs *kubernetes.Clientset, node, cpu string) {
	for ctx.Err() == nil {
		list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err == nil {
			var running []corev1.Pod
			for _, p := range list.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					running = append(running, p)
				}
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, board.base+"/isle/v1/stats", bytes.NewReader(usageReport(cpu, running)))
			if err == nil {
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+board.token)
				if resp, err := board.http.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// usageReport is a report of the board's usage and of each pod using cpu
// and 30Mi, over the last 5 s.
func usageReport(cpu string, pods []corev1.Pod) []byte {
	type container struct {
		Name  string            `json:"name"`
		Usage map[string]string `json:"usage"`
	}
	type pod struct {
		Namespace  string      `json:"namespace"`
		Name       string      `json:"name"`
		UID        string      `json:"uid"`
		Containers []container `json:"containers"`
	}
	r := struct {
		Timestamp string            `json:"timestamp"`
		Window    string            `json:"window"`
		Node      map[string]string `json:"node"`
		Pods      []pod             `json:"pods"`
	}{Timestamp: time.Now().UTC().Format(time.RFC3339), Window: "5s", Node: map[string]string{"cpu": "500m", "memory": "600Mi"}, Pods: []pod{}}
	for _, p := range pods {
		r.Pods = append(r.Pods, pod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID),
			Containers: []container{{Name: "nginx", Usage: map[string]string{"cpu": cpu, "memory": "30Mi"}}}})
	}
	b, _ := json.Marshal(r)
	return b
}
