// Package hpa is the HorizontalPodAutoscaler controller.
package hpa

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/events"
	"github.com/isle-cluster/isle/control/registry"
)

// PodMetricsSource is where the HPA controller reads pods' resource usage:
// on a server, the leader's own cache of what the node agents report
// (package metrics), which is what metrics.k8s.io serves.
type PodMetricsSource interface {
	// PodMetrics returns the latest usage of the pod with this UID.
	PodMetrics(namespace, name string, uid types.UID) (metricsv1beta1.PodMetrics, bool)
}

// Config tunes the HorizontalPodAutoscaler controller. Zero values take
// Kubernetes' defaults (kube-controller-manager's
// --horizontal-pod-autoscaler-* flags).
type Config struct {
	// Metrics gives the pods' usage. nil: none, and every HPA reports that
	// it gets no metrics.
	Metrics PodMetricsSource
	// SyncPeriod is how often every HPA is reconciled. Default 15 s.
	SyncPeriod time.Duration
	// DownscaleStabilization is the scale-down stabilization window of
	// HPAs whose behavior does not set one. Default 5 min.
	DownscaleStabilization time.Duration
	// Tolerance is how far the usage ratio may be from 1 without scaling,
	// unless the behavior sets one. Default 0.1.
	Tolerance float64
	// CPUInitializationPeriod: CPU samples of a pod younger than this
	// count only once it has been ready a whole window. Default 5 min.
	CPUInitializationPeriod time.Duration
	// InitialReadinessDelay: a pod not ready that turned so within this
	// of its start is taken as not ready yet (its CPU samples are left
	// out). Default 30 s.
	InitialReadinessDelay time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Controller scales the targets of autoscaling/v2
// HorizontalPodAutoscalers (autoscaling/v1 ones are the same objects), as
// Kubernetes' HPA controller does for Resource metrics (cpu and memory,
// Utilization and AverageValue targets):
//   - the target is read and scaled through the registry's scale
//     subresource (Deployments, ReplicaSets); its pods are those of its
//     scale's selector;
//   - the proposal of each metric is the ratio of the pods' usage to the
//     target applied to the ready pods (see replicaCalc); the largest
//     proposal wins;
//   - it is stabilized and rate-limited (hpa_behavior.go), bounded by
//     minReplicas and maxReplicas, and written to the target's scale; a
//     rescale is recorded as a SuccessfulRescale Event;
//   - the status (currentReplicas, desiredReplicas, currentMetrics,
//     lastScaleTime, and the AbleToScale, ScalingActive and ScalingLimited
//     conditions with Kubernetes' reasons and messages) is written only
//     when it changes.
//
// Each HPA is reconciled when it is created or its spec changes, and every
// SyncPeriod. Pods, Object, External and ContainerResource metrics are
// refused: isle serves no custom or external metrics API.
type Controller struct {
	store  *registry.Store
	cfg    Config
	log    *slog.Logger
	events *events.Recorder
	calc   replicaCalc
}

const hpaWorkers = 2

// New returns the HorizontalPodAutoscaler controller, recording its Events
// with rec.
func New(store *registry.Store, log *slog.Logger, rec *events.Recorder, cfg Config) *Controller {
	if cfg.SyncPeriod <= 0 {
		cfg.SyncPeriod = 15 * time.Second
	}
	if cfg.DownscaleStabilization <= 0 {
		cfg.DownscaleStabilization = 5 * time.Minute
	}
	if cfg.Tolerance <= 0 {
		cfg.Tolerance = 0.1
	}
	if cfg.CPUInitializationPeriod <= 0 {
		cfg.CPUInitializationPeriod = 5 * time.Minute
	}
	if cfg.InitialReadinessDelay <= 0 {
		cfg.InitialReadinessDelay = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Controller{store: store, cfg: cfg, log: log, events: rec,
		calc: replicaCalc{now: cfg.Now, cpuInitializationPeriod: cfg.CPUInitializationPeriod, delayOfInitialReadinessStatus: cfg.InitialReadinessDelay}}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "horizontalpodautoscaling" }

// hpaRun is the state of one Run (one term of leadership).
type hpaRun struct {
	*Controller
	hpas, pods *registry.Resource
	queue      *kit.Queue

	mu      sync.Mutex
	history map[string]*hpaHistory
}

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	r := &hpaRun{Controller: c, queue: kit.NewQueue(time.Second, c.cfg.SyncPeriod), history: map[string]*hpaHistory{},
		hpas: kit.MustLookup(c.store, autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers")),
		pods: kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("pods"))}
	var wg sync.WaitGroup
	wg.Go(func() { r.watch(ctx) })
	kit.RunWorkers(ctx, hpaWorkers, r.queue, func(key string) { r.work(ctx, key) })
	wg.Wait()
}

// watch queues HPAs that are created or whose spec changes (their status
// changes are this controller's own), and every HPA every SyncPeriod.
func (r *hpaRun) watch(ctx context.Context) {
	hpas := kit.NewCache[*autoscalingv2.HorizontalPodAutoscaler]()
	loop := kit.Loop{Store: r.store, Log: r.log, Name: "hpa controller", ResyncEvery: r.cfg.SyncPeriod, Resync: func() {
		for _, key := range hpas.Keys() {
			r.queue.Add(key)
		}
	}}
	loop.Run(ctx, hpas.Watch(r.hpas, nil, func(typ watch.EventType, old, hpa *autoscalingv2.HorizontalPodAutoscaler) {
		key := kit.Key(hpa)
		if typ == watch.Deleted {
			r.mu.Lock()
			delete(r.history, key)
			r.mu.Unlock()
			return
		}
		if old == nil || old.Generation != hpa.Generation {
			r.queue.Add(key)
		}
	}))
}

// work reconciles one queued HPA. A failed reconcile is not retried sooner
// than the next sync: what went wrong is in the HPA's conditions and
// Events, and retrying faster would only repeat them.
func (r *hpaRun) work(ctx context.Context, key string) {
	if err := r.sync(ctx, key); err != nil && ctx.Err() == nil {
		r.log.Debug("hpa controller: reconcile failed", "hpa", key, "err", err)
	}
}

func (r *hpaRun) sync(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	obj, err := r.store.Get(ctx, r.hpas, ns, name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	h, ok := r.history[key]
	if !ok {
		h = &hpaHistory{}
		r.history[key] = h
	}
	r.mu.Unlock()
	return r.reconcile(ctx, obj.(*autoscalingv2.HorizontalPodAutoscaler), h)
}

// hpaSync is one reconcile of one HPA: hpa is a private copy whose status
// is being computed.
type hpaSync struct {
	*hpaRun
	hpa *autoscalingv2.HorizontalPodAutoscaler
	now time.Time
}

// conditionSetter sets a condition of the HPA being reconciled.
type conditionSetter func(t autoscalingv2.HorizontalPodAutoscalerConditionType, status bool, reason, message string)

// setCondition sets a condition, its transition time moved only when its
// status changes.
func (s *hpaSync) setCondition(t autoscalingv2.HorizontalPodAutoscalerConditionType, status bool, reason, message string) {
	st := corev1.ConditionFalse
	if status {
		st = corev1.ConditionTrue
	}
	conds := s.hpa.Status.Conditions
	i := 0
	for i < len(conds) && conds[i].Type != t {
		i++
	}
	if i == len(conds) {
		conds = append(conds, autoscalingv2.HorizontalPodAutoscalerCondition{Type: t})
	}
	if conds[i].Status != st {
		conds[i].LastTransitionTime = metav1.NewTime(s.now)
	}
	conds[i].Status, conds[i].Reason, conds[i].Message = st, reason, message
	s.hpa.Status.Conditions = conds
}

func (s *hpaSync) warn(reason, message string) {
	s.events.Eventf(s.hpa, corev1.EventTypeWarning, reason, "%s", message)
}

// reconcile is Kubernetes' reconcileAutoscaler.
func (r *hpaRun) reconcile(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, h *hpaHistory) error {
	s := &hpaSync{hpaRun: r, hpa: hpa, now: r.cfg.Now()}
	original := hpa.Status.DeepCopy()
	ref := hpa.Spec.ScaleTargetRef
	reference := fmt.Sprintf("%s/%s/%s", ref.Kind, hpa.Namespace, ref.Name)

	target, scale, err := r.getScale(ctx, hpa)
	if err != nil {
		s.warn("FailedGetScale", err.Error())
		s.setCondition(autoscalingv2.AbleToScale, false, "FailedGetScale", "the HPA controller was unable to get the target's current scale: "+err.Error())
		if werr := r.writeStatus(ctx, original, hpa); werr != nil {
			return werr
		}
		return fmt.Errorf("get the scale of %s: %w", reference, err)
	}
	s.setCondition(autoscalingv2.AbleToScale, true, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
	current := scale.Spec.Replicas
	h.recordInitialRecommendation(current, s.now)

	minReplicas := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minReplicas = *hpa.Spec.MinReplicas
	}
	rules := rulesOf(hpa.Spec.Behavior, r.cfg.DownscaleStabilization)
	var (
		desired       int32
		rescaleReason string
		statuses      []autoscalingv2.MetricStatus
		rescale       = true
		retErr        error
	)
	switch {
	case current == 0 && minReplicas != 0:
		// Scaled to zero by hand: autoscaling is off until it is scaled up.
		desired, rescale = 0, false
		s.setCondition(autoscalingv2.ScalingActive, false, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
	case current > hpa.Spec.MaxReplicas:
		desired, rescaleReason = hpa.Spec.MaxReplicas, "Current number of replicas above Spec.MaxReplicas"
	case current < minReplicas:
		desired, rescaleReason = minReplicas, "Current number of replicas below Spec.MinReplicas"
	default:
		var metricName string
		desired, metricName, statuses, err = s.computeReplicasForMetrics(ctx, scale)
		if err != nil && desired == -1 {
			s.setStatus(current, hpa.Status.DesiredReplicas, statuses, false)
			if werr := r.writeStatus(ctx, original, hpa); werr != nil {
				return werr
			}
			s.warn("FailedComputeMetricsReplicas", err.Error())
			return fmt.Errorf("compute the replicas of %s from its metrics: %w", reference, err)
		}
		// Some metrics failed but the others allow a scale-up: go on,
		// and report the failure at the end.
		retErr = err
		if desired > current {
			rescaleReason = metricName + " above target"
		}
		if desired < current {
			rescaleReason = "All metrics below target"
		}
		n := normalization{minReplicas: minReplicas, maxReplicas: hpa.Spec.MaxReplicas, currentReplicas: current,
			desiredReplicas: desired, downscaleStabilization: r.cfg.DownscaleStabilization}
		if rules != nil {
			n.rules = *rules
			desired = h.normalizeWithBehaviors(n, s.now, s.setCondition)
		} else {
			desired = h.normalize(n, s.now, s.setCondition)
		}
		rescale = desired != current
	}

	if rescale {
		want := scale.DeepCopy()
		want.Spec.Replicas = desired
		if _, err := r.store.UpdateScale(ctx, target, hpa.Namespace, ref.Name, want, "", nil, registry.WriteOptions{}); err != nil {
			s.events.Eventf(hpa, corev1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", desired, rescaleReason, err)
			s.setCondition(autoscalingv2.AbleToScale, false, "FailedUpdateScale", "the HPA controller was unable to update the target scale: "+err.Error())
			s.setStatus(current, hpa.Status.DesiredReplicas, statuses, false)
			if werr := r.writeStatus(ctx, original, hpa); werr != nil {
				return werr
			}
			return fmt.Errorf("rescale %s: %w", reference, err)
		}
		s.setCondition(autoscalingv2.AbleToScale, true, "SucceededRescale", fmt.Sprintf("the HPA controller was able to update the target scale to %d", desired))
		s.events.Eventf(hpa, corev1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: %s", desired, rescaleReason)
		h.storeScaleEvent(rules, current, desired, s.now)
		r.log.Info("hpa controller: rescaled", "hpa", hpa.Namespace+"/"+hpa.Name, "target", reference,
			"from", current, "to", desired, "reason", rescaleReason)
	} else {
		desired = current
	}
	s.setStatus(current, desired, statuses, rescale)
	if err := r.writeStatus(ctx, original, hpa); err != nil {
		return err
	}
	return retErr
}

func (s *hpaSync) setStatus(current, desired int32, statuses []autoscalingv2.MetricStatus, rescaled bool) {
	st := &s.hpa.Status
	st.CurrentReplicas, st.DesiredReplicas, st.CurrentMetrics = current, desired, statuses
	if rescaled {
		t := metav1.NewTime(s.now)
		st.LastScaleTime = &t
	}
}

// writeStatus writes the HPA's status if it changed.
func (r *hpaRun) writeStatus(ctx context.Context, original *autoscalingv2.HorizontalPodAutoscalerStatus, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	if equality.Semantic.DeepEqual(original, &hpa.Status) {
		return nil
	}
	_, err := r.store.Mutate(ctx, r.hpas, hpa.Namespace, hpa.Name, "status", func(obj runtime.Object) error {
		cur := obj.(*autoscalingv2.HorizontalPodAutoscaler)
		if cur.UID != hpa.UID {
			return errHPAReplaced
		}
		cur.Status = hpa.Status
		return nil
	})
	if errors.Is(err, errHPAReplaced) || apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("write the status of HPA %s/%s: %w", hpa.Namespace, hpa.Name, err)
	}
	return nil
}

var errHPAReplaced = errors.New("hpa controller: the HPA was replaced")

// getScale finds the HPA's target resource (of its group and kind, with a
// scale subresource) and reads its scale.
func (r *hpaRun) getScale(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler) (*registry.Resource, *autoscalingv1.Scale, error) {
	ref := hpa.Spec.ScaleTargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid API version in scale target reference: %w", err)
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	var target *registry.Resource
	for _, res := range r.store.Resources().All() {
		if res.Group == gk.Group && res.Kind == gk.Kind && (target == nil || res.Scale != nil && target.Scale == nil) {
			target = res
		}
	}
	switch {
	case target == nil:
		return nil, nil, &meta.NoKindMatchError{GroupKind: gk}
	case target.Scale == nil:
		return nil, nil, fmt.Errorf("%s have no scale subresource: the HPA scales Deployments, ReplicaSets, StatefulSets and ReplicationControllers", target)
	}
	scale, err := r.store.GetScale(ctx, target, hpa.Namespace, ref.Name)
	return target, scale, err
}

// computeReplicasForMetrics proposes a replica count from every metric of
// the HPA, with their statuses and the name of the metric that decided.
// It returns -1 and an error when no metric could be computed, or when
// some failed and the others would scale down.
func (s *hpaSync) computeReplicasForMetrics(ctx context.Context, scale *autoscalingv1.Scale) (int32, string, []autoscalingv2.MetricStatus, error) {
	specs := s.hpa.Spec.Metrics
	pods, err := s.selectPods(ctx, scale.Status.Selector)
	if err != nil {
		return -1, "", nil, err
	}
	statuses := make([]autoscalingv2.MetricStatus, len(specs))
	var (
		replicas        int32
		metric          string
		invalid         int
		invalidErr      error
		invalidCondType autoscalingv2.HorizontalPodAutoscalerConditionType
		invalidReason   string
		invalidMessage  string
	)
	for i := range specs {
		proposal, name, cond, err := s.computeReplicasForMetric(scale.Spec.Replicas, &specs[i], pods, &statuses[i])
		if err != nil {
			if invalid == 0 {
				invalidErr, invalidCondType, invalidReason, invalidMessage = err, cond.Type, cond.Reason, cond.Message
			}
			invalid++
			continue
		}
		if replicas == 0 || proposal > replicas {
			replicas, metric = proposal, name
		}
	}
	if invalidErr != nil {
		invalidErr = fmt.Errorf("invalid metrics (%v invalid out of %v), first error is: %v", invalid, len(specs), invalidErr)
	}
	if invalid >= len(specs) || (invalid > 0 && replicas < scale.Spec.Replicas) {
		s.setCondition(invalidCondType, false, invalidReason, invalidMessage)
		return -1, "", statuses, invalidErr
	}
	s.setCondition(autoscalingv2.ScalingActive, true, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from "+metric)
	return replicas, metric, statuses, invalidErr
}

// selectPods parses the target's selector and lists its pods.
func (s *hpaSync) selectPods(ctx context.Context, selector string) ([]*corev1.Pod, error) {
	if selector == "" {
		s.warn("SelectorRequired", "selector is required")
		s.setCondition(autoscalingv2.ScalingActive, false, "InvalidSelector", "the HPA target's scale is missing a selector")
		return nil, errors.New("selector is required")
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		msg := fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", err)
		s.warn("InvalidSelector", msg)
		s.setCondition(autoscalingv2.ScalingActive, false, "InvalidSelector", msg)
		return nil, errors.New(msg)
	}
	// This member's copy of the store is fresh enough for a decision that
	// is taken again every sync.
	list, err := s.store.List(ctx, s.pods, s.hpa.Namespace, metav1.ListOptions{LabelSelector: sel.String(), ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("unable to get pods while calculating replica count: %w", err)
	}
	items := list.(*corev1.PodList).Items
	pods := make([]*corev1.Pod, len(items))
	for i := range items {
		pods[i] = &items[i]
	}
	return pods, nil
}

// computeReplicasForMetric proposes a replica count from one metric and
// fills its status. On failure it returns the ScalingActive condition to
// report (and has recorded its Event).
func (s *hpaSync) computeReplicasForMetric(current int32, spec *autoscalingv2.MetricSpec, pods []*corev1.Pod,
	status *autoscalingv2.MetricStatus) (int32, string, autoscalingv2.HorizontalPodAutoscalerCondition, error) {
	if spec.Type != autoscalingv2.ResourceMetricSourceType || spec.Resource == nil {
		reason := map[autoscalingv2.MetricSourceType]string{
			autoscalingv2.PodsMetricSourceType: "FailedGetPodsMetric", autoscalingv2.ObjectMetricSourceType: "FailedGetObjectMetric",
			autoscalingv2.ExternalMetricSourceType: "FailedGetExternalMetric", autoscalingv2.ContainerResourceMetricSourceType: "FailedGetContainerResourceMetric",
		}[spec.Type]
		if reason == "" {
			reason = "InvalidMetricSourceType"
		}
		err := fmt.Errorf("%s metrics are not supported: isle serves the resource metrics of pods (cpu and memory) only", spec.Type)
		return 0, "", s.unableToCompute(reason, err), err
	}
	name := spec.Resource.Name
	replicas, value, metric, err := s.resourceMetric(current, name, spec.Resource.Target, pods)
	if err != nil {
		cond := s.unableToCompute("FailedGetResourceMetric", err)
		return 0, "", cond, fmt.Errorf("failed to get %s resource metric value: %v", name, err)
	}
	*status = autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricStatus{Name: name, Current: *value}}
	return replicas, metric, autoscalingv2.HorizontalPodAutoscalerCondition{}, nil
}

// unableToCompute records a metric's failure as an Event and returns the
// ScalingActive condition that reports it.
func (s *hpaSync) unableToCompute(reason string, err error) autoscalingv2.HorizontalPodAutoscalerCondition {
	s.warn(reason, err.Error())
	return autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse,
		Reason: reason, Message: "the HPA was unable to compute the replica count: " + err.Error()}
}

// resourceMetric proposes a replica count from a Resource metric: an
// average value target, or a utilization target (percent of requests).
func (s *hpaSync) resourceMetric(current int32, name corev1.ResourceName, target autoscalingv2.MetricTarget,
	pods []*corev1.Pod) (int32, *autoscalingv2.MetricValueStatus, string, error) {
	tol := s.tolerances()
	if target.AverageValue != nil {
		metrics, err := s.podMetrics(pods, name)
		if err != nil {
			return 0, nil, "", fmt.Errorf("failed to get %s usage: unable to get metrics for resource %s: %v", name, name, err)
		}
		replicas, usage, err := s.calc.rawResourceReplicas(current, target.AverageValue.MilliValue(), name, pods, metrics, tol)
		if err != nil {
			return 0, nil, "", fmt.Errorf("failed to get %s usage: %v", name, err)
		}
		return replicas, &autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(usage, resource.DecimalSI)},
			fmt.Sprintf("%s resource", name), nil
	}
	if target.AverageUtilization == nil {
		return 0, nil, "", errors.New("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set")
	}
	metrics, err := s.podMetrics(pods, name)
	if err != nil {
		return 0, nil, "", fmt.Errorf("failed to get %s utilization: unable to get metrics for resource %s: %v", name, name, err)
	}
	replicas, utilization, raw, err := s.calc.resourceReplicas(current, *target.AverageUtilization, name, pods, metrics, tol)
	if err != nil {
		return 0, nil, "", fmt.Errorf("failed to get %s utilization: %v", name, err)
	}
	return replicas, &autoscalingv2.MetricValueStatus{AverageUtilization: &utilization, AverageValue: resource.NewMilliQuantity(raw, resource.DecimalSI)},
		fmt.Sprintf("%s resource utilization (percentage of request)", name), nil
}

// podMetrics is the usage of a resource by the pods that have samples,
// each pod's the sum of its containers' (a pod with a container lacking
// the resource is left out), as Kubernetes' resource metrics client
// reads metrics.k8s.io.
func (s *hpaSync) podMetrics(pods []*corev1.Pod, name corev1.ResourceName) (podMetricsInfo, error) {
	out := podMetricsInfo{}
	found := 0
	for _, p := range pods {
		if s.cfg.Metrics == nil {
			break
		}
		m, ok := s.cfg.Metrics.PodMetrics(p.Namespace, p.Name, p.UID)
		if !ok {
			continue
		}
		found++
		sum, missing := int64(0), len(m.Containers) == 0
		for _, c := range m.Containers {
			q, ok := c.Usage[name]
			if !ok {
				missing = true
				break
			}
			sum += q.MilliValue()
		}
		if !missing {
			out[p.Name] = podMetric{timestamp: m.Timestamp.Time, window: m.Window.Duration, value: sum}
		}
	}
	if found == 0 {
		return nil, errors.New("no metrics returned from resource metrics API")
	}
	return out, nil
}

// tolerances are the controller's, or the behavior's when it sets them.
func (s *hpaSync) tolerances() tolerances {
	t := tolerances{scaleDown: s.cfg.Tolerance, scaleUp: s.cfg.Tolerance}
	if b := s.hpa.Spec.Behavior; b != nil {
		if b.ScaleDown != nil && b.ScaleDown.Tolerance != nil {
			t.scaleDown = b.ScaleDown.Tolerance.AsApproximateFloat64()
		}
		if b.ScaleUp != nil && b.ScaleUp.Tolerance != nil {
			t.scaleUp = b.ScaleUp.Tolerance.AsApproximateFloat64()
		}
	}
	return t
}
