package hpa_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/isle-cluster/isle/control/controllers"
	"github.com/isle-cluster/isle/control/controllers/hpa"
	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// fakeMetrics reports the same usage for every pod, sampled now.
type fakeMetrics struct {
	clock *kit.TestClock
	mu    sync.Mutex
	usage corev1.ResourceList
}

func (f *fakeMetrics) set(usage corev1.ResourceList) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usage = usage
}

func (f *fakeMetrics) PodMetrics(namespace, name string, _ types.UID) (metricsv1beta1.PodMetrics, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.usage == nil {
		return metricsv1beta1.PodMetrics{}, false
	}
	return metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Timestamp: metav1.NewTime(f.clock.Now()), Window: metav1.Duration{Duration: 15 * time.Second},
		Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: f.usage.DeepCopy()}}}, true
}

// env is the whole table on a store.
type env struct{ *tabletest.Env }

// newHPAEnv is the whole table with the HPA controller reading fake metrics on a
// clock of the test's, syncing every 20 ms; and a stand-in kubelet that
// marks every pod Running and Ready (started ten minutes before the
// clock's time, past the CPU initialization period) once the scheduler
// has put it on the one node.
func newHPAEnv(t *testing.T) (*env, *fakeMetrics, *kit.TestClock) {
	t.Helper()
	clock := kit.NewTestClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	metrics := &fakeMetrics{clock: clock}
	e := &env{tabletest.New(t, controllers.WithHPA(hpa.Config{Metrics: metrics, SyncPeriod: 20 * time.Millisecond, Now: clock.Now}))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		runPods(ctx, e.Store, clock)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	e.Namespace(t, "default")
	e.MustCreate(t, e.Res(t, "", "v1", "nodes"), "", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pi-1"},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
				corev1.ResourcePods: resource.MustParse("110")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		}})
	return e, metrics, clock
}

// runPods marks pods bound to a node Running and Ready until ctx ends.
func runPods(ctx context.Context, s *registry.Store, clock *kit.TestClock) {
	pods, _ := s.Resources().Lookup(corev1.SchemeGroupVersion.WithResource("pods"))
	for ctx.Err() == nil {
		list, err := s.List(ctx, pods, "", metav1.ListOptions{ResourceVersion: "0"})
		if err == nil {
			for _, p := range list.(*corev1.PodList).Items {
				if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodRunning || p.DeletionTimestamp != nil {
					continue
				}
				started := metav1.NewTime(clock.Now().Add(-10 * time.Minute))
				_, _ = s.Mutate(ctx, pods, p.Namespace, p.Name, "status", func(obj runtime.Object) error {
					st := &obj.(*corev1.Pod).Status
					st.Phase, st.StartTime = corev1.PodRunning, &started
					st.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started}}
					return nil
				})
			}
		}
		kit.Sleep(ctx, 10*time.Millisecond)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func cpuMem(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

// webDeployment is a Deployment of pods that request 100m CPU and 64Mi.
func (e *env) webDeployment(t *testing.T, replicas int32) {
	t.Helper()
	e.MustCreate(t, e.Res(t, "apps", "v1", "deployments"), "default", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx",
					Resources: corev1.ResourceRequirements{Requests: cpuMem("100m", "64Mi")}}}}}}})
}

func (e *env) replicas(t *testing.T) int32 {
	t.Helper()
	obj, err := e.Get(e.Ctx, e.Res(t, "apps", "v1", "deployments"), "default", "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *obj.(*appsv1.Deployment).Spec.Replicas
}

func (e *env) hpa(t *testing.T, name string) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	obj, err := e.Get(e.Ctx, e.Res(t, "autoscaling", "v2", "horizontalpodautoscalers"), "default", name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*autoscalingv2.HorizontalPodAutoscaler)
}

// condition renders an HPA condition as "True Reason: message".
func hpaCondition(h *autoscalingv2.HorizontalPodAutoscaler, ct autoscalingv2.HorizontalPodAutoscalerConditionType) string {
	for _, c := range h.Status.Conditions {
		if c.Type == ct {
			return string(c.Status) + " " + c.Reason + ": " + c.Message
		}
	}
	return ""
}

// hpaEvents lists the messages of the HPA's Events with a reason.
func (e *env) hpaEvents(t *testing.T, name, reason string) []string {
	t.Helper()
	list, err := e.List(e.Ctx, e.Res(t, "", "v1", "events"), "default", metav1.ListOptions{
		FieldSelector: "involvedObject.kind=HorizontalPodAutoscaler,involvedObject.name=" + name + ",reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range list.(*corev1.EventList).Items {
		if ev.Source.Component != "horizontal-pod-autoscaler" {
			t.Errorf("event from %q", ev.Source.Component)
		}
		out = append(out, ev.Message)
	}
	return out
}

func cpuHPA(name string, minR, maxR, utilization int32, behavior *autoscalingv2.HorizontalPodAutoscalerBehavior) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    &minR, MaxReplicas: maxR, Behavior: behavior,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &utilization}}}},
		}}
}

// TestHPAScalesDeployment: CPU over target scales a Deployment up at once;
// under target, it is scaled down only after the five-minute
// stabilization window.
func TestHPAScalesDeployment(t *testing.T) {
	e, metrics, clock := newHPAEnv(t)
	e.webDeployment(t, 1)
	hpas := e.Res(t, "autoscaling", "v2", "horizontalpodautoscalers")
	e.MustCreate(t, hpas, "default", cpuHPA("web", 1, 3, 50, nil))

	// 150m of 100m requested: 300% of the 50% target.
	metrics.set(cpuMem("150m", "20Mi"))
	tabletest.Eventually(t, "the Deployment is scaled to 3", func() bool { return e.replicas(t) == 3 })
	tabletest.Eventually(t, "the HPA's status shows 3 replicas at 150% CPU, limited by maxReplicas", func() bool {
		h := e.hpa(t, "web")
		st := h.Status
		return st.CurrentReplicas == 3 && st.DesiredReplicas == 3 && st.LastScaleTime != nil && len(st.CurrentMetrics) == 1 &&
			st.CurrentMetrics[0].Resource != nil && *st.CurrentMetrics[0].Resource.Current.AverageUtilization == 150 &&
			st.CurrentMetrics[0].Resource.Current.AverageValue.String() == "150m" &&
			hpaCondition(h, autoscalingv2.ScalingActive) == "True ValidMetricFound: the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)" &&
			hpaCondition(h, autoscalingv2.ScalingLimited) == "True TooManyReplicas: the desired replica count is more than the maximum replica count"
	})
	tabletest.Eventually(t, "a SuccessfulRescale event", func() bool {
		return slices.Equal(e.hpaEvents(t, "web", "SuccessfulRescale"),
			[]string{"New size: 3; reason: cpu resource utilization (percentage of request) above target"})
	})

	// 10m of 100m: the proposal is 1 replica, held back by the window.
	metrics.set(cpuMem("10m", "20Mi"))
	tabletest.Eventually(t, "the scale-down is stabilized", func() bool {
		h := e.hpa(t, "web")
		return hpaCondition(h, autoscalingv2.AbleToScale) ==
			"True ScaleDownStabilized: recent recommendations were higher than current one, applying the highest recent recommendation" &&
			len(h.Status.CurrentMetrics) == 1 && *h.Status.CurrentMetrics[0].Resource.Current.AverageUtilization == 10
	})
	if n := e.replicas(t); n != 3 {
		t.Fatalf("scaled to %d within the stabilization window", n)
	}
	clock.Advance(5*time.Minute + time.Second)
	tabletest.Eventually(t, "the Deployment is scaled down to 1 after the window", func() bool { return e.replicas(t) == 1 })
	tabletest.Eventually(t, "a SuccessfulRescale event for the scale-down", func() bool {
		return slices.Contains(e.hpaEvents(t, "web", "SuccessfulRescale"), "New size: 1; reason: All metrics below target")
	})
	tabletest.Eventually(t, "the status shows the scale-down", func() bool {
		h := e.hpa(t, "web")
		return h.Status.DesiredReplicas == 1 && h.Status.LastScaleTime.Time.Equal(clock.Now())
	})
}

// TestHPABehavior: a behavior's policy limits the rate of a memory
// AverageValue scale-up, one pod a period.
func TestHPABehavior(t *testing.T) {
	e, metrics, clock := newHPAEnv(t)
	e.webDeployment(t, 1)
	one := int32(1)
	e.MustCreate(t, e.Res(t, "autoscaling", "v2", "horizontalpodautoscalers"), "default", &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    &one, MaxReplicas: 10,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceMemory, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptrQ("50Mi")}}}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
				Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}}}},
		}})
	// 200Mi a pod: four times the target.
	metrics.set(cpuMem("10m", "200Mi"))
	tabletest.Eventually(t, "one more replica", func() bool { return e.replicas(t) == 2 })
	tabletest.Eventually(t, "the rate limit is reported", func() bool {
		h := e.hpa(t, "web")
		return hpaCondition(h, autoscalingv2.ScalingLimited) == "True ScaleUpLimit: the desired replica count is increasing faster than the maximum scale rate" &&
			h.Status.CurrentMetrics[0].Resource.Current.AverageValue.String() == "209715200"
	})
	if n := e.replicas(t); n != 2 {
		t.Fatalf("%d replicas within the policy's period, want 2", n)
	}
	clock.Advance(61 * time.Second)
	tabletest.Eventually(t, "one more replica in the next period", func() bool { return e.replicas(t) == 3 })
	if msgs := e.hpaEvents(t, "web", "SuccessfulRescale"); !slices.Contains(msgs, "New size: 2; reason: memory resource above target") {
		t.Errorf("events %q", msgs)
	}
}

func ptrQ(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// TestHPAConditions: what an HPA reports when it cannot scale, as
// Kubernetes words it.
func TestHPAConditions(t *testing.T) {
	e, _, _ := newHPAEnv(t)
	e.webDeployment(t, 2)
	hpas := e.Res(t, "autoscaling", "v2", "horizontalpodautoscalers")
	target := func(h *autoscalingv2.HorizontalPodAutoscaler, apiVersion, kind, name string) *autoscalingv2.HorizontalPodAutoscaler {
		h.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: apiVersion, Kind: kind, Name: name}
		return h
	}
	tests := []struct {
		hpa        *autoscalingv2.HorizontalPodAutoscaler
		condition  autoscalingv2.HorizontalPodAutoscalerConditionType
		want       string
		event      string
		eventWants string
	}{
		{cpuHPA("no-metrics", 1, 5, 50, nil), autoscalingv2.ScalingActive,
			"False FailedGetResourceMetric: the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API",
			"FailedComputeMetricsReplicas",
			"invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API"},
		{target(cpuHPA("missing-target", 1, 5, 50, nil), "apps/v1", "Deployment", "nope"), autoscalingv2.AbleToScale,
			`False FailedGetScale: the HPA controller was unable to get the target's current scale: deployments.apps "nope" not found`,
			"FailedGetScale", `deployments.apps "nope" not found`},
		{target(cpuHPA("unknown-kind", 1, 5, 50, nil), "apps/v1", "Gadget", "db"), autoscalingv2.AbleToScale,
			`False FailedGetScale: the HPA controller was unable to get the target's current scale: no matches for kind "Gadget" in group "apps"`,
			"FailedGetScale", `no matches for kind "Gadget" in group "apps"`},
		{target(cpuHPA("no-scale", 1, 5, 50, nil), "apps/v1", "DaemonSet", "agent"), autoscalingv2.AbleToScale,
			`False FailedGetScale: the HPA controller was unable to get the target's current scale: daemonsets.apps have no scale subresource: the HPA scales Deployments, ReplicaSets, StatefulSets and ReplicationControllers`,
			"", ""},
		{func() *autoscalingv2.HorizontalPodAutoscaler {
			h := cpuHPA("pods-metric", 1, 5, 50, nil)
			h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "requests-per-second"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptrQ("10")}}}}
			return h
		}(), autoscalingv2.ScalingActive,
			"False FailedGetPodsMetric: the HPA was unable to compute the replica count: Pods metrics are not supported: isle serves the resource metrics of pods (cpu and memory) only",
			"FailedGetPodsMetric", "Pods metrics are not supported: isle serves the resource metrics of pods (cpu and memory) only"},
	}
	for _, tc := range tests {
		e.MustCreate(t, hpas, "default", tc.hpa)
	}
	for _, tc := range tests {
		t.Run(tc.hpa.Name, func(t *testing.T) {
			tabletest.Eventually(t, "the condition", func() bool { return hpaCondition(e.hpa(t, tc.hpa.Name), tc.condition) == tc.want })
			if tc.event != "" {
				tabletest.Eventually(t, "the "+tc.event+" event", func() bool { return slices.Contains(e.hpaEvents(t, tc.hpa.Name, tc.event), tc.eventWants) })
			}
		})
	}
	// A Deployment scaled to zero by hand is left alone.
	if _, err := e.Mutate(e.Ctx, e.Res(t, "apps", "v1", "deployments"), "default", "web", "", func(obj runtime.Object) error {
		zero := int32(0)
		obj.(*appsv1.Deployment).Spec.Replicas = &zero
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "scaling disabled", func() bool {
		return strings.HasPrefix(hpaCondition(e.hpa(t, "no-metrics"), autoscalingv2.ScalingActive), "False ScalingDisabled: scaling is disabled since the replica count of the target is zero")
	})
	if n := e.replicas(t); n != 0 {
		t.Fatalf("a Deployment scaled to zero was scaled to %d", n)
	}
}
