package hpa

import (
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var hpaNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testPod describes a pod of the replica calculation tests.
type testPod struct {
	name    string
	phase   corev1.PodPhase // default Running
	ready   corev1.ConditionStatus
	started time.Duration // before now; 0: 10 minutes
	readyAt time.Duration // before now, the Ready transition; 0: when started
	deleted bool
	request string // of the resource, "" for none
	usage   int64  // milli-units; -1: no metrics
	sampled time.Duration
}

func (tp testPod) pod(resourceName corev1.ResourceName) *corev1.Pod {
	if tp.phase == "" {
		tp.phase = corev1.PodRunning
	}
	if tp.ready == "" {
		tp.ready = corev1.ConditionTrue
	}
	if tp.started == 0 {
		tp.started = 10 * time.Minute
	}
	if tp.readyAt == 0 {
		tp.readyAt = tp.started
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tp.name, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: tp.phase, StartTime: &metav1.Time{Time: hpaNow.Add(-tp.started)},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: tp.ready, LastTransitionTime: metav1.NewTime(hpaNow.Add(-tp.readyAt))}}}}
	if tp.request != "" {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{resourceName: resource.MustParse(tp.request)}
	}
	if tp.deleted {
		p.DeletionTimestamp = &metav1.Time{Time: hpaNow}
	}
	return p
}

func podsAndMetrics(tps []testPod, resourceName corev1.ResourceName) ([]*corev1.Pod, podMetricsInfo) {
	var pods []*corev1.Pod
	metrics := podMetricsInfo{}
	for _, tp := range tps {
		pods = append(pods, tp.pod(resourceName))
		if tp.usage >= 0 {
			metrics[tp.name] = podMetric{timestamp: hpaNow.Add(-tp.sampled), window: 30 * time.Second, value: tp.usage}
		}
	}
	return pods, metrics
}

var testCalc = replicaCalc{now: func() time.Time { return hpaNow }, cpuInitializationPeriod: 5 * time.Minute, delayOfInitialReadinessStatus: 30 * time.Second}

var defaultTolerances = tolerances{scaleDown: 0.1, scaleUp: 0.1}

func TestResourceReplicas(t *testing.T) {
	ready := func(name string, usage int64) testPod { return testPod{name: name, request: "1", usage: usage} }
	tests := []struct {
		name            string
		resource        corev1.ResourceName
		current, target int32
		pods            []testPod
		tol             tolerances
		want            int32
		wantUtilization int32
		wantRaw         int64
		wantErr         string
	}{
		{name: "scale up by the ratio", current: 3, target: 50,
			pods: []testPod{ready("a", 900), ready("b", 1000), ready("c", 1100)}, want: 6, wantUtilization: 100, wantRaw: 1000},
		{name: "scale down by the ratio", current: 3, target: 50,
			pods: []testPod{ready("a", 100), ready("b", 100), ready("c", 100)}, want: 1, wantUtilization: 10, wantRaw: 100},
		{name: "within tolerance", current: 3, target: 50,
			pods: []testPod{ready("a", 500), ready("b", 520), ready("c", 540)}, want: 3, wantUtilization: 52, wantRaw: 520},
		{name: "within a behavior's wider scale-up tolerance", current: 3, target: 50, tol: tolerances{scaleDown: 0.1, scaleUp: 0.5},
			pods: []testPod{ready("a", 700), ready("b", 700), ready("c", 700)}, want: 3, wantUtilization: 70, wantRaw: 700},
		{name: "just outside tolerance", current: 3, target: 50,
			pods: []testPod{ready("a", 560), ready("b", 560), ready("c", 560)}, want: 4, wantUtilization: 56, wantRaw: 560},
		{name: "pods without metrics count as idle on a scale-up", current: 3, target: 50,
			pods: []testPod{ready("a", 1000), ready("b", 1000), ready("c", -1)}, want: 4, wantUtilization: 100, wantRaw: 1000},
		{name: "pods without metrics count as using their request on a scale-down", current: 4, target: 50,
			pods: []testPod{ready("a", 100), ready("b", 100), ready("c", 100), ready("d", -1)}, want: 3, wantUtilization: 10, wantRaw: 100},
		{name: "pods without metrics count as using the target above 100%", current: 3, target: 200,
			pods: []testPod{ready("a", 500), ready("b", 500), ready("c", -1)}, want: 2, wantUtilization: 50, wantRaw: 500},
		{name: "pods without metrics that would reverse the direction", current: 3, target: 50,
			pods: []testPod{ready("a", 600), ready("b", -1), ready("c", -1)}, want: 3, wantUtilization: 60, wantRaw: 600},
		{name: "unready pods count as idle on a scale-up, and reverse it here", current: 4, target: 50,
			pods: []testPod{ready("a", 600), ready("b", 600),
				{name: "c", request: "1", usage: 2000, ready: corev1.ConditionFalse, readyAt: 10*time.Minute - 10*time.Second},
				{name: "d", request: "1", usage: 2000, phase: corev1.PodPending}},
			want: 4, wantUtilization: 60, wantRaw: 600},
		{name: "unready pods are left out of a scale-down", current: 3, target: 50,
			pods: []testPod{ready("a", 100), ready("b", 100),
				{name: "c", request: "1", usage: 3000, ready: corev1.ConditionFalse, readyAt: 10*time.Minute - 10*time.Second}},
			want: 1, wantUtilization: 10, wantRaw: 100},
		{name: "a sample taken before a young pod was ready a whole window is left out", current: 2, target: 50,
			pods: []testPod{ready("a", 1000), {name: "b", request: "1", usage: 5000, started: time.Minute, readyAt: 20 * time.Second}},
			want: 2, wantUtilization: 100, wantRaw: 1000},
		{name: "a young pod ready for a whole window counts", current: 2, target: 50,
			pods: []testPod{ready("a", 1000), {name: "b", request: "1", usage: 1000, started: time.Minute, readyAt: 50 * time.Second}},
			want: 4, wantUtilization: 100, wantRaw: 1000},
		{name: "deleted and failed pods are ignored", current: 3, target: 50,
			pods: []testPod{ready("a", 1000), ready("b", 1000), {name: "c", request: "1", usage: 0, deleted: true},
				{name: "d", request: "1", usage: 0, phase: corev1.PodFailed}},
			want: 4, wantUtilization: 100, wantRaw: 1000},
		{name: "readiness does not matter for memory", resource: corev1.ResourceMemory, current: 2, target: 50,
			pods: []testPod{{name: "a", request: "100", usage: 150000, ready: corev1.ConditionFalse},
				{name: "b", request: "100", usage: 150000, ready: corev1.ConditionFalse}},
			want: 6, wantUtilization: 150, wantRaw: 150000},
		{name: "only pending pods", current: 2, target: 50,
			pods:    []testPod{{name: "a", request: "1", usage: 100, phase: corev1.PodPending}},
			wantErr: "did not receive metrics for targeted pods (pods might be unready)"},
		{name: "a container without a request", current: 2, target: 50,
			pods: []testPod{ready("a", 100), {name: "b", usage: 100}}, wantErr: "missing request for cpu in container c of Pod b"},
		{name: "no pods", current: 2, target: 50, wantErr: "no pods returned by selector while calculating replica count"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.resource
			if res == "" {
				res = corev1.ResourceCPU
			}
			tol := tc.tol
			if tol == (tolerances{}) {
				tol = defaultTolerances
			}
			pods, metrics := podsAndMetrics(tc.pods, res)
			got, utilization, raw, err := testCalc.resourceReplicas(tc.current, tc.target, res, pods, metrics, tol)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || utilization != tc.wantUtilization || raw != tc.wantRaw {
				t.Fatalf("replicas %d utilization %d%% raw %d, want %d %d%% %d", got, utilization, raw, tc.want, tc.wantUtilization, tc.wantRaw)
			}
		})
	}
}

func TestRawResourceReplicas(t *testing.T) {
	pod := func(name string, usage int64) testPod { return testPod{name: name, usage: usage} }
	tests := []struct {
		name      string
		current   int32
		target    int64 // milli-units a pod
		pods      []testPod
		want      int32
		wantUsage int64
		wantErr   string
	}{
		{"scale up by the ratio", 3, 500, []testPod{pod("a", 1000), pod("b", 1000), pod("c", 1000)}, 6, 1000, ""},
		{"scale down by the ratio", 4, 500, []testPod{pod("a", 100), pod("b", 100), pod("c", 100), pod("d", 100)}, 1, 100, ""},
		{"within tolerance", 3, 500, []testPod{pod("a", 520), pod("b", 520), pod("c", 520)}, 3, 520, ""},
		{"pods without metrics count as using the target on a scale-down", 3, 500, []testPod{pod("a", 100), pod("b", 100), pod("c", -1)}, 2, 100, ""},
		{"pods without metrics count as idle on a scale-up", 3, 500, []testPod{pod("a", 1500), pod("b", 1500), pod("c", -1)}, 6, 1500, ""},
		{"no requests needed", 1, 500, []testPod{pod("a", 2000)}, 4, 2000, ""},
		{"nothing ready", 1, 500, []testPod{{name: "a", usage: 1, phase: corev1.PodPending}}, 0, 0,
			"did not receive metrics for targeted pods (pods might be unready)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pods, metrics := podsAndMetrics(tc.pods, corev1.ResourceMemory)
			got, usage, err := testCalc.rawResourceReplicas(tc.current, tc.target, corev1.ResourceMemory, pods, metrics, defaultTolerances)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want || usage != tc.wantUsage {
				t.Fatalf("replicas %d usage %d err %v, want %d %d", got, usage, err, tc.want, tc.wantUsage)
			}
		})
	}
}

// conditionRecorder collects the conditions a normalization sets.
type conditionRecorder map[autoscalingv2.HorizontalPodAutoscalerConditionType]string

func (c conditionRecorder) set(t autoscalingv2.HorizontalPodAutoscalerConditionType, status bool, reason, _ string) {
	s := "False"
	if status {
		s = "True"
	}
	c[t] = s + " " + reason
}

func recs(ago ...any) []timestampedRecommendation {
	var out []timestampedRecommendation
	for i := 0; i+1 < len(ago); i += 2 {
		out = append(out, timestampedRecommendation{recommendation: int32(ago[i+1].(int)), timestamp: hpaNow.Add(-ago[i].(time.Duration))})
	}
	return out
}

func TestNormalizeWithoutBehavior(t *testing.T) {
	tests := []struct {
		name                       string
		history                    []timestampedRecommendation
		current, desired, min, max int32
		want                       int32
		ableToScale, limited       string
		kept                       int // recommendations remembered after
	}{
		{"scale down held by a recent higher recommendation", recs(2*time.Minute, 5), 5, 3, 1, 10, 5,
			"True ScaleDownStabilized", "False DesiredWithinRange", 2},
		{"scale down once the window has passed", recs(6*time.Minute, 5), 5, 3, 1, 10, 3,
			"True ReadyForNewScale", "False DesiredWithinRange", 1},
		{"the highest recommendation of the window", recs(4*time.Minute, 4, time.Minute, 7, 30*time.Second, 6), 8, 2, 1, 10, 7,
			"True ScaleDownStabilized", "False DesiredWithinRange", 4},
		{"at most double, or 4, a sync", nil, 2, 10, 1, 20, 4, "True ReadyForNewScale", "True ScaleUpLimit", 1},
		{"double", nil, 5, 30, 1, 20, 10, "True ReadyForNewScale", "True ScaleUpLimit", 1},
		{"at most maxReplicas", nil, 3, 10, 1, 5, 5, "True ReadyForNewScale", "True TooManyReplicas", 1},
		{"at least minReplicas", nil, 3, 1, 2, 5, 2, "True ReadyForNewScale", "True TooFewReplicas", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &hpaHistory{recommendations: tc.history}
			conds := conditionRecorder{}
			got := h.normalize(normalization{minReplicas: tc.min, maxReplicas: tc.max, currentReplicas: tc.current,
				desiredReplicas: tc.desired, downscaleStabilization: 5 * time.Minute}, hpaNow, conds.set)
			if got != tc.want || conds[autoscalingv2.AbleToScale] != tc.ableToScale || conds[autoscalingv2.ScalingLimited] != tc.limited {
				t.Fatalf("got %d %v, want %d AbleToScale %q ScalingLimited %q", got, conds, tc.want, tc.ableToScale, tc.limited)
			}
			// The recommendation is recorded, in the place of one outside
			// the window if there is one.
			last := false
			for _, r := range h.recommendations {
				last = last || r.timestamp.Equal(hpaNow) && r.recommendation == tc.desired
			}
			if !last || len(h.recommendations) != tc.kept {
				t.Fatalf("recommendations %v: want %d, this one among them", h.recommendations, tc.kept)
			}
		})
	}
}

func TestNormalizeWithBehavior(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	sel := func(s autoscalingv2.ScalingPolicySelect) *autoscalingv2.ScalingPolicySelect { return &s }
	pods := func(v, period int32) autoscalingv2.HPAScalingPolicy {
		return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: v, PeriodSeconds: period}
	}
	percent := func(v, period int32) autoscalingv2.HPAScalingPolicy {
		return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: v, PeriodSeconds: period}
	}
	events := func(change int32, ago time.Duration) []timestampedScaleEvent {
		return []timestampedScaleEvent{{replicaChange: change, timestamp: hpaNow.Add(-ago)}}
	}
	tests := []struct {
		name                       string
		behavior                   autoscalingv2.HorizontalPodAutoscalerBehavior
		history                    hpaHistory
		current, desired, min, max int32
		want                       int32
		ableToScale, limited       string
	}{
		{name: "default scale-up: 4 pods or 100% a period, the more", current: 1, desired: 10, min: 1, max: 20, want: 5,
			ableToScale: "True ReadyForNewScale", limited: "True ScaleUpLimit"},
		{name: "default scale-up: doubling beats 4 pods", current: 6, desired: 20, min: 1, max: 30, want: 12,
			ableToScale: "True ReadyForNewScale", limited: "True ScaleUpLimit"},
		{name: "default scale-up: the period's earlier scale-ups count", history: hpaHistory{scaleUpEvents: events(4, 5*time.Second)},
			current: 5, desired: 20, min: 1, max: 30, want: 5, ableToScale: "True ReadyForNewScale", limited: "True ScaleUpLimit"},
		{name: "default scale-up: a past period does not", history: hpaHistory{scaleUpEvents: events(4, 16*time.Second)},
			current: 5, desired: 20, min: 1, max: 30, want: 10, ableToScale: "True ReadyForNewScale", limited: "True ScaleUpLimit"},
		{name: "scale-up bounded by maxReplicas", current: 4, desired: 20, min: 1, max: 6, want: 6,
			ableToScale: "True ReadyForNewScale", limited: "True TooManyReplicas"},
		{name: "default scale-down is stabilized 5 minutes", history: hpaHistory{recommendations: recs(100*time.Second, 8)},
			current: 8, desired: 2, min: 1, max: 10, want: 8, ableToScale: "True ScaleDownStabilized", limited: "False DesiredWithinRange"},
		{name: "default scale-down after the window: 100% a period", history: hpaHistory{recommendations: recs(301*time.Second, 8)},
			current: 8, desired: 2, min: 1, max: 10, want: 2, ableToScale: "True ReadyForNewScale", limited: "False DesiredWithinRange"},
		{name: "scale-down bounded by minReplicas", current: 8, desired: 1, min: 3, max: 10, want: 3,
			behavior:    autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: i32(0)}},
			ableToScale: "True ReadyForNewScale", limited: "True TooFewReplicas"},
		{name: "one pod a minute down", current: 8, desired: 2, min: 1, max: 10, want: 7,
			behavior: autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: i32(0), Policies: []autoscalingv2.HPAScalingPolicy{pods(1, 60)}}},
			ableToScale: "True ReadyForNewScale", limited: "True ScaleDownLimit"},
		{name: "one pod a minute down, one gone already", current: 7, desired: 2, min: 1, max: 10, want: 7,
			history: hpaHistory{scaleDownEvents: events(1, 30*time.Second)},
			behavior: autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: i32(0), Policies: []autoscalingv2.HPAScalingPolicy{pods(1, 60)}}},
			ableToScale: "True ReadyForNewScale", limited: "True ScaleDownLimit"},
		{name: "selectPolicy Min takes the smaller change", current: 10, desired: 40, min: 1, max: 50, want: 14,
			behavior: autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
				SelectPolicy: sel(autoscalingv2.MinChangePolicySelect), Policies: []autoscalingv2.HPAScalingPolicy{pods(4, 15), percent(100, 15)}}},
			ableToScale: "True ReadyForNewScale", limited: "True ScaleUpLimit"},
		{name: "selectPolicy Max takes the larger change", current: 10, desired: 40, min: 1, max: 50, want: 20,
			behavior: autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
				SelectPolicy: sel(autoscalingv2.MaxChangePolicySelect), Policies: []autoscalingv2.HPAScalingPolicy{pods(4, 15), percent(100, 15)}}},
			ableToScale: "True ReadyForNewScale", limited: "True ScaleUpLimit"},
		{name: "scale-down disabled", current: 8, desired: 2, min: 1, max: 10, want: 8,
			behavior: autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: i32(0), SelectPolicy: sel(autoscalingv2.DisabledPolicySelect)}},
			ableToScale: "True ReadyForNewScale", limited: "True ScaleDownLimit"},
		{name: "scale-up stabilized a minute", current: 3, desired: 10, min: 1, max: 20, want: 3,
			history:     hpaHistory{recommendations: recs(30*time.Second, 3)},
			behavior:    autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: i32(60)}},
			ableToScale: "True ScaleUpStabilized", limited: "False DesiredWithinRange"},
		{name: "scale-up stabilized to the lowest recommendation of the window", current: 3, desired: 10, min: 1, max: 20, want: 6,
			history:     hpaHistory{recommendations: recs(90*time.Second, 3, 50*time.Second, 6, 10*time.Second, 9)},
			behavior:    autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: i32(60)}},
			ableToScale: "True ScaleUpStabilized", limited: "False DesiredWithinRange"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.history
			conds := conditionRecorder{}
			n := normalization{rules: *rulesOf(&tc.behavior, 5*time.Minute), minReplicas: tc.min, maxReplicas: tc.max,
				currentReplicas: tc.current, desiredReplicas: tc.desired}
			got := h.normalizeWithBehaviors(n, hpaNow, conds.set)
			if got != tc.want || conds[autoscalingv2.AbleToScale] != tc.ableToScale || conds[autoscalingv2.ScalingLimited] != tc.limited {
				t.Fatalf("got %d %v, want %d AbleToScale %q ScalingLimited %q", got, conds, tc.want, tc.ableToScale, tc.limited)
			}
		})
	}
}

func TestStoreScaleEvent(t *testing.T) {
	rules := rulesOf(&autoscalingv2.HorizontalPodAutoscalerBehavior{}, 5*time.Minute)
	h := &hpaHistory{}
	h.storeScaleEvent(rules, 2, 6, hpaNow.Add(-time.Minute))
	// The event of a minute ago is past the longest period (15 s): its
	// place is reused.
	h.storeScaleEvent(rules, 6, 8, hpaNow.Add(-10*time.Second))
	h.storeScaleEvent(rules, 8, 5, hpaNow)
	h.storeScaleEvent(rules, 5, 9, hpaNow)
	if len(h.scaleUpEvents) != 2 || h.scaleUpEvents[0].replicaChange != 2 || !h.scaleUpEvents[0].timestamp.Equal(hpaNow.Add(-10*time.Second)) ||
		h.scaleUpEvents[1].replicaChange != 4 {
		t.Fatalf("scale-up events %+v", h.scaleUpEvents)
	}
	if len(h.scaleDownEvents) != 1 || h.scaleDownEvents[0].replicaChange != 3 {
		t.Fatalf("scale-down events %+v", h.scaleDownEvents)
	}
	if got := replicasChangedWithin(15, h.scaleUpEvents, hpaNow); got != 6 {
		t.Fatalf("replicas added in the last 15 s: %d, want 6", got)
	}
	// Without a behavior nothing is kept.
	none := &hpaHistory{}
	none.storeScaleEvent(nil, 1, 5, hpaNow)
	if len(none.scaleUpEvents) != 0 {
		t.Fatal("an event was kept for an HPA without a behavior")
	}
}

func TestRulesOf(t *testing.T) {
	if rulesOf(nil, time.Minute) != nil {
		t.Fatal("rules for an HPA without a behavior")
	}
	r := rulesOf(&autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
		Tolerance: resource.NewMilliQuantity(50, resource.DecimalSI)}}, 2*time.Minute)
	var b strings.Builder
	for _, p := range r.up.Policies {
		b.WriteString(string(p.Type))
	}
	if *r.up.StabilizationWindowSeconds != 0 || *r.down.StabilizationWindowSeconds != 120 || b.String() != "PodsPercent" ||
		*r.up.SelectPolicy != autoscalingv2.MaxChangePolicySelect || r.up.Tolerance.MilliValue() != 50 {
		t.Fatalf("rules %+v %+v", r.up, r.down)
	}
}
