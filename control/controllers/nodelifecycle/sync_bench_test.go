package nodelifecycle

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft/rafttest"
)

type staticLiveness []Board

func (l staticLiveness) Boards() []Board          { return l }
func (l staticLiveness) Changed() <-chan struct{} { return nil }

// BenchmarkSyncTainted: one pass of the controller over 51 Nodes, 50 of
// them lost (unreachable, NoExecute) with 1,000 pods that tolerate it for
// ever, as make bench-map leaves a server: nothing is due. (A pass when
// the pods were listed: ~50 ms and 9.7 MB; from the watch: ~1 ms, the
// Nodes' list.)
func BenchmarkSyncTainted(b *testing.B) {
	c := rafttest.NewCluster(b, rafttest.Options{Size: 1})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := registry.New(registry.Config{Node: c.Node(c.IDs()[0]), Logger: log})
	ctx := b.Context()
	res := func(resource string) *registry.Resource {
		r, _ := store.Resources().Lookup(schema.GroupVersionResource{Version: "v1", Resource: resource})
		return r
	}
	nodes, pods := res("nodes"), res("pods")
	if _, err := store.Create(ctx, res("namespaces"), "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, registry.WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	live := staticLiveness{{Name: "server", State: BoardAlive}}
	added := metav1.NewTime(time.Now().Add(-time.Hour))
	for i := range 51 {
		name := fmt.Sprintf("pi-%03d", i)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.42.%d.0/24", i)},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}}
		n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &added},
			{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &added}}
		if i == 50 {
			n.Name, n.Spec.Taints = "server", nil
			n.Status.Conditions[0].Status = corev1.ConditionTrue
		} else {
			live = append(live, Board{Name: name, State: BoardDead})
		}
		if _, err := store.Create(ctx, nodes, "", n, registry.WriteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 1000 {
		p := benchPod(fmt.Sprintf("web-%04d", i), fmt.Sprintf("pi-%03d", i%50))
		if _, err := store.Create(ctx, pods, "default", p, registry.WriteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	ctl := New(store, live, Config{Grace: time.Millisecond, Hold: time.Millisecond}, log)
	go ctl.pods.follow(ctx, store, pods, log)
	for deadline := time.Now().Add(10 * time.Second); !ctl.pods.ready(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the pod watch brought no pods in 10 s")
		}
	}
	started := time.Now().Add(-time.Hour)
	ctl.sync(ctx, nodes, pods, started)
	b.ReportAllocs()
	for b.Loop() {
		ctl.sync(ctx, nodes, pods, started)
	}
	if ctl.disruption != disruptionPartial {
		b.Fatalf("disruption %q, want partial", ctl.disruption)
	}
}

// benchPod is a pod of about 2 KiB of JSON bound to node that tolerates
// its loss for ever, as a DaemonSet's.
func benchPod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
		Labels:      map[string]string{"app": "web", "pod-template-hash": "6d8f7b9c54"},
		Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"}},
		Spec: corev1.PodSpec{NodeName: node,
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			Containers: []corev1.Container{{Name: "web", Image: "registry.example.com/bench/web:1.27.3",
				Args: []string{"--listen=:8080", "--metrics=:9090", "--config=/etc/web/config.yaml"},
				Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "CACHE_SIZE_MB", Value: "64"},
					{Name: "UPSTREAM_URL", Value: "http://api.default.svc.cluster.local:8080"},
					{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://otel-collector.monitoring.svc.cluster.local:4317"}},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
}
