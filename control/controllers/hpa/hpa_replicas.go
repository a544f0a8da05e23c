package hpa

import (
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// The replica calculation of Kubernetes' HPA controller for Resource
// metrics: the ratio of the pods' usage to the target, applied to the
// pods that count, with Kubernetes' handling of pods that are not ready
// or have no metrics.

// podMetric is one pod's usage of a resource, in milli-units (millicores,
// millibytes), summed over its containers.
type podMetric struct {
	timestamp time.Time
	window    time.Duration
	value     int64
}

// podMetricsInfo is the usage of pods by name.
type podMetricsInfo map[string]podMetric

// tolerances is how far the usage ratio may be from 1 without a change of
// scale, below (scale-down) and above (scale-up).
type tolerances struct {
	scaleDown, scaleUp float64
}

func (t tolerances) isWithin(ratio float64) bool {
	return 1-t.scaleDown <= ratio && ratio <= 1+t.scaleUp
}

// replicaCalc proposes replica counts, as Kubernetes' ReplicaCalculator.
type replicaCalc struct {
	now func() time.Time
	// cpuInitializationPeriod: a pod started less than this ago counts for
	// CPU only once ready for a whole metrics window.
	cpuInitializationPeriod time.Duration
	// delayOfInitialReadinessStatus: a pod that is not ready and turned so
	// within this of its start is taken as never ready yet.
	delayOfInitialReadinessStatus time.Duration
}

var errNoPods = errors.New("no pods returned by selector while calculating replica count")

// resourceReplicas proposes a replica count for a utilization target (a
// percentage of the pods' requests). It returns the current utilization
// and the raw average usage (milli-units) of the pods that count.
func (c *replicaCalc) resourceReplicas(current, targetUtilization int32, resource corev1.ResourceName, pods []*corev1.Pod,
	metrics podMetricsInfo, tol tolerances) (replicas, utilization int32, rawUtilization int64, err error) {
	if len(pods) == 0 {
		return 0, 0, 0, errNoPods
	}
	readyPodCount, unreadyPods, missingPods, ignoredPods := c.groupPods(pods, metrics, resource)
	removeMetricsForPods(metrics, ignoredPods)
	removeMetricsForPods(metrics, unreadyPods)
	if len(metrics) == 0 {
		return 0, 0, 0, errors.New("did not receive metrics for targeted pods (pods might be unready)")
	}
	requests, err := podRequests(pods, resource)
	if err != nil {
		return 0, 0, 0, err
	}
	usageRatio, utilization, rawUtilization, err := utilizationRatio(metrics, requests, targetUtilization)
	if err != nil {
		return 0, 0, 0, err
	}

	scaleUpWithUnready := len(unreadyPods) > 0 && usageRatio > 1.0
	if !scaleUpWithUnready && len(missingPods) == 0 {
		if tol.isWithin(usageRatio) {
			return current, utilization, rawUtilization, nil
		}
		return int32(math.Ceil(usageRatio * float64(readyPodCount))), utilization, rawUtilization, nil
	}

	// Pods without metrics: on a scale-down they are assumed to use their
	// whole request (or the target, if above 100%), on a scale-up nothing.
	if len(missingPods) > 0 {
		switch {
		case usageRatio < 1.0:
			fallback := int64(max(100, targetUtilization))
			for name := range missingPods {
				metrics[name] = podMetric{value: requests[name] * fallback / 100}
			}
		case usageRatio > 1.0:
			for name := range missingPods {
				metrics[name] = podMetric{value: 0}
			}
		}
	}
	// Unready pods count, on a scale-up, as using nothing.
	if scaleUpWithUnready {
		for name := range unreadyPods {
			metrics[name] = podMetric{value: 0}
		}
	}
	newUsageRatio, _, _, err := utilizationRatio(metrics, requests, targetUtilization)
	if err != nil {
		return 0, utilization, rawUtilization, err
	}
	return keepDirection(current, usageRatio, newUsageRatio, len(metrics), tol), utilization, rawUtilization, nil
}

// rawResourceReplicas proposes a replica count for an average usage
// target (milli-units a pod). It returns the current average usage.
func (c *replicaCalc) rawResourceReplicas(current int32, targetUsage int64, resource corev1.ResourceName, pods []*corev1.Pod,
	metrics podMetricsInfo, tol tolerances) (replicas int32, usage int64, err error) {
	if len(pods) == 0 {
		return 0, 0, errNoPods
	}
	readyPodCount, unreadyPods, missingPods, ignoredPods := c.groupPods(pods, metrics, resource)
	removeMetricsForPods(metrics, ignoredPods)
	removeMetricsForPods(metrics, unreadyPods)
	if len(metrics) == 0 {
		return 0, 0, errors.New("did not receive metrics for targeted pods (pods might be unready)")
	}
	usageRatio, usage := averageRatio(metrics, targetUsage)

	scaleUpWithUnready := len(unreadyPods) > 0 && usageRatio > 1.0
	if !scaleUpWithUnready && len(missingPods) == 0 {
		if tol.isWithin(usageRatio) {
			return current, usage, nil
		}
		return int32(math.Ceil(usageRatio * float64(readyPodCount))), usage, nil
	}

	// Pods without metrics: on a scale-down they are assumed to use the
	// target, on a scale-up nothing.
	if len(missingPods) > 0 {
		value := int64(0)
		if usageRatio < 1.0 {
			value = targetUsage
		}
		for name := range missingPods {
			metrics[name] = podMetric{value: value}
		}
	}
	if scaleUpWithUnready {
		for name := range unreadyPods {
			metrics[name] = podMetric{value: 0}
		}
	}
	newUsageRatio, _ := averageRatio(metrics, targetUsage)
	return keepDirection(current, usageRatio, newUsageRatio, len(metrics), tol), usage, nil
}

// keepDirection is the proposal once pods without metrics or unready pods
// are filled in: the current count if the change is within tolerance or
// the filled-in pods reverse its direction.
func keepDirection(current int32, usageRatio, newUsageRatio float64, pods int, tol tolerances) int32 {
	if tol.isWithin(newUsageRatio) || (usageRatio < 1.0 && newUsageRatio > 1.0) || (usageRatio > 1.0 && newUsageRatio < 1.0) {
		return current
	}
	replicas := int32(math.Ceil(newUsageRatio * float64(pods)))
	if (newUsageRatio < 1.0 && replicas > current) || (newUsageRatio > 1.0 && replicas < current) {
		return current
	}
	return replicas
}

// groupPods sorts pods as Kubernetes does: deleted and failed pods are
// ignored; pending ones are unready; pods with no metrics are missing; for
// CPU, a pod not ready, or one in its initialization period whose sample
// predates a whole window of readiness, is unready.
func (c *replicaCalc) groupPods(pods []*corev1.Pod, metrics podMetricsInfo, resource corev1.ResourceName) (readyPodCount int, unreadyPods, missingPods, ignoredPods sets.Set[string]) {
	unreadyPods, missingPods, ignoredPods = sets.New[string](), sets.New[string](), sets.New[string]()
	now := c.now()
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed {
			ignoredPods.Insert(pod.Name)
			continue
		}
		if pod.Status.Phase == corev1.PodPending {
			unreadyPods.Insert(pod.Name)
			continue
		}
		metric, found := metrics[pod.Name]
		if !found {
			missingPods.Insert(pod.Name)
			continue
		}
		if resource == corev1.ResourceCPU {
			ready := podCondition(pod, corev1.PodReady)
			var unready bool
			switch {
			case ready == nil || pod.Status.StartTime == nil:
				unready = true
			case pod.Status.StartTime.Add(c.cpuInitializationPeriod).After(now):
				unready = ready.Status == corev1.ConditionFalse || metric.timestamp.Before(ready.LastTransitionTime.Add(metric.window))
			default:
				unready = ready.Status == corev1.ConditionFalse && pod.Status.StartTime.Add(c.delayOfInitialReadinessStatus).After(ready.LastTransitionTime.Time)
			}
			if unready {
				unreadyPods.Insert(pod.Name)
				continue
			}
		}
		readyPodCount++
	}
	return readyPodCount, unreadyPods, missingPods, ignoredPods
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func removeMetricsForPods(metrics podMetricsInfo, pods sets.Set[string]) {
	for name := range pods {
		delete(metrics, name)
	}
}

// podRequests sums each pod's requests of resource (milli-units) over its
// containers and sidecars (restartable init containers); every one of them
// must have a request.
func podRequests(pods []*corev1.Pod, resource corev1.ResourceName) (map[string]int64, error) {
	requests := make(map[string]int64, len(pods))
	for _, pod := range pods {
		containers := pod.Spec.Containers
		for _, c := range pod.Spec.InitContainers {
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				containers = append(containers[:len(containers):len(containers)], c)
			}
		}
		sum := int64(0)
		for _, c := range containers {
			q, ok := c.Resources.Requests[resource]
			if !ok {
				return nil, fmt.Errorf("missing request for %s in container %s of Pod %s", resource, c.Name, pod.Name)
			}
			sum += q.MilliValue()
		}
		requests[pod.Name] = sum
	}
	return requests, nil
}

// utilizationRatio is the pods' usage as a share of their requests, over
// the target utilization; with the utilization (percent) and the average
// usage a pod.
func utilizationRatio(metrics podMetricsInfo, requests map[string]int64, targetUtilization int32) (ratio float64, utilization int32, rawAverage int64, err error) {
	var usageTotal, requestsTotal int64
	n := 0
	for name, m := range metrics {
		request, ok := requests[name]
		if !ok {
			continue // a metric of a pod that is not a target's
		}
		usageTotal += m.value
		requestsTotal += request
		n++
	}
	if requestsTotal == 0 {
		return 0, 0, 0, errors.New("no metrics returned matched known pods")
	}
	utilization = int32(usageTotal * 100 / requestsTotal)
	return float64(utilization) / float64(targetUtilization), utilization, usageTotal / int64(n), nil
}

// averageRatio is the pods' average usage over the target.
func averageRatio(metrics podMetricsInfo, targetUsage int64) (ratio float64, average int64) {
	var total int64
	for _, m := range metrics {
		total += m.value
	}
	average = total / int64(len(metrics))
	return float64(average) / float64(targetUsage), average
}
