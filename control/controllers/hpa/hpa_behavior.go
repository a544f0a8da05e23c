package hpa

import (
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

// How an HPA's proposal becomes the replica count, as in Kubernetes:
// recommendations are stabilized over a window (the highest of the last
// five minutes when scaling down, by default) and the change is limited
// in rate, by the behavior's policies when the HPA has a behavior, else by
// the built-in limit of doubling (at least 4 pods) a sync.

// Reasons and messages of the AbleToScale and ScalingLimited conditions.
const (
	msgScaleUpStabilized   = "recent recommendations were lower than current one, applying the lowest recent recommendation"
	msgScaleDownStabilized = "recent recommendations were higher than current one, applying the highest recent recommendation"
	msgReadyForNewScale    = "recommended size matches current size"
	msgScaleUpLimit        = "the desired replica count is increasing faster than the maximum scale rate"
	msgScaleDownLimit      = "the desired replica count is decreasing faster than the maximum scale rate"
	msgTooManyReplicas     = "the desired replica count is more than the maximum replica count"
	msgTooFewReplicas      = "the desired replica count is less than the minimum replica count"
	msgDesiredWithinRange  = "the desired count is within the acceptable range"
)

// Without a behavior, a sync may at most double the replicas, or bring
// them to 4.
const (
	scaleUpLimitFactor  = 2.0
	scaleUpLimitMinimum = 4.0
)

type timestampedRecommendation struct {
	recommendation int32
	timestamp      time.Time
}

type timestampedScaleEvent struct {
	replicaChange int32 // positive for both directions
	timestamp     time.Time
	outdated      bool // older than the longest policy period: reusable
}

// hpaHistory is what the controller remembers of one HPA between syncs
// (in memory, as Kubernetes' controller: a new leader starts afresh).
type hpaHistory struct {
	recommendations []timestampedRecommendation
	scaleUpEvents   []timestampedScaleEvent
	scaleDownEvents []timestampedScaleEvent
}

// scaleRules are an HPA's behavior with every field Kubernetes' defaults
// would have filled (the scale-down window from the controller's flag).
type scaleRules struct {
	up, down *autoscalingv2.HPAScalingRules
}

// normalization is one decision's input.
type normalization struct {
	rules                            scaleRules // with a behavior
	minReplicas, maxReplicas         int32
	currentReplicas, desiredReplicas int32
	// downscaleStabilization is the scale-down window without a behavior.
	downscaleStabilization time.Duration
}

// recordInitialRecommendation makes the current count the first
// recommendation, so a controller that has just started does not scale
// down before a whole stabilization window has passed.
func (h *hpaHistory) recordInitialRecommendation(current int32, now time.Time) {
	if h.recommendations == nil {
		h.recommendations = []timestampedRecommendation{{current, now}}
	}
}

// record keeps a recommendation, in the place of one older than cutoff
// if there is one.
func (h *hpaHistory) record(recommendation int32, now time.Time, old func(time.Time) bool) {
	for i, rec := range h.recommendations {
		if old(rec.timestamp) {
			h.recommendations[i] = timestampedRecommendation{recommendation, now}
			return
		}
	}
	h.recommendations = append(h.recommendations, timestampedRecommendation{recommendation, now})
}

// normalize decides the replica count of an HPA without a behavior, and
// sets its AbleToScale and ScalingLimited conditions.
func (h *hpaHistory) normalize(n normalization, now time.Time, set conditionSetter) int32 {
	stabilized := h.stabilize(n.desiredReplicas, n.downscaleStabilization, now)
	if stabilized != n.desiredReplicas {
		set(autoscalingv2.AbleToScale, true, "ScaleDownStabilized", msgScaleDownStabilized)
	} else {
		set(autoscalingv2.AbleToScale, true, "ReadyForNewScale", msgReadyForNewScale)
	}
	desired, reason, message := convertDesiredReplicasWithRules(n.currentReplicas, stabilized, n.minReplicas, n.maxReplicas)
	set(autoscalingv2.ScalingLimited, desired != stabilized, reason, message)
	return desired
}

// stabilize returns the highest recommendation of the window, this one
// included, and records this one.
func (h *hpaHistory) stabilize(desired int32, window time.Duration, now time.Time) int32 {
	cutoff := now.Add(-window)
	highest := desired
	for _, rec := range h.recommendations {
		if !rec.timestamp.Before(cutoff) {
			highest = max(highest, rec.recommendation)
		}
	}
	h.record(desired, now, func(t time.Time) bool { return t.Before(cutoff) })
	return highest
}

// convertDesiredReplicasWithRules bounds a count by min and max replicas
// and the built-in scale-up limit.
func convertDesiredReplicasWithRules(current, desired, minReplicas, maxReplicas int32) (int32, string, string) {
	maxAllowed, reason, message := maxReplicas, "TooManyReplicas", msgTooManyReplicas
	if limit := int32(math.Max(scaleUpLimitFactor*float64(current), scaleUpLimitMinimum)); maxReplicas > limit {
		maxAllowed, reason, message = limit, "ScaleUpLimit", msgScaleUpLimit
	}
	switch {
	case desired < minReplicas:
		return minReplicas, "TooFewReplicas", msgTooFewReplicas
	case desired > maxAllowed:
		return maxAllowed, reason, message
	}
	return desired, "DesiredWithinRange", msgDesiredWithinRange
}

// normalizeWithBehaviors decides the replica count of an HPA with a
// behavior, and sets its AbleToScale and ScalingLimited conditions.
func (h *hpaHistory) normalizeWithBehaviors(n normalization, now time.Time, set conditionSetter) int32 {
	stabilized, reason, message := h.stabilizeWithBehaviors(n, now)
	if stabilized != n.desiredReplicas {
		set(autoscalingv2.AbleToScale, true, reason, message)
	} else {
		set(autoscalingv2.AbleToScale, true, "ReadyForNewScale", msgReadyForNewScale)
	}
	n.desiredReplicas = stabilized
	desired, reason, message := h.limitRate(n, now)
	set(autoscalingv2.ScalingLimited, desired != stabilized, reason, message)
	return desired
}

// stabilizeWithBehaviors brings the recommendation between the lowest
// recommendation of the scale-up window and the highest of the scale-down
// window (the current count when both allow it), and records it.
func (h *hpaHistory) stabilizeWithBehaviors(n normalization, now time.Time) (int32, string, string) {
	upCutoff := now.Add(-time.Duration(*n.rules.up.StabilizationWindowSeconds) * time.Second)
	downCutoff := now.Add(-time.Duration(*n.rules.down.StabilizationWindowSeconds) * time.Second)
	upRecommendation, downRecommendation := n.desiredReplicas, n.desiredReplicas
	for _, rec := range h.recommendations {
		if rec.timestamp.After(upCutoff) {
			upRecommendation = min(rec.recommendation, upRecommendation)
		}
		if rec.timestamp.After(downCutoff) {
			downRecommendation = max(rec.recommendation, downRecommendation)
		}
	}
	recommendation := min(max(n.currentReplicas, upRecommendation), downRecommendation)
	h.record(n.desiredReplicas, now, func(t time.Time) bool { return t.Before(upCutoff) && t.Before(downCutoff) })
	if n.desiredReplicas >= n.currentReplicas {
		return recommendation, "ScaleUpStabilized", msgScaleUpStabilized
	}
	return recommendation, "ScaleDownStabilized", msgScaleDownStabilized
}

// limitRate bounds a count by the behavior's policies over the scale
// events of their periods, and by min and max replicas.
func (h *hpaHistory) limitRate(n normalization, now time.Time) (int32, string, string) {
	switch {
	case n.desiredReplicas > n.currentReplicas:
		limit := max(scaleUpLimit(n.currentReplicas, h.scaleUpEvents, h.scaleDownEvents, n.rules.up, now), n.currentReplicas)
		maxAllowed, reason, message := n.maxReplicas, "TooManyReplicas", msgTooManyReplicas
		if maxAllowed > limit {
			maxAllowed, reason, message = limit, "ScaleUpLimit", msgScaleUpLimit
		}
		if n.desiredReplicas > maxAllowed {
			return maxAllowed, reason, message
		}
	case n.desiredReplicas < n.currentReplicas:
		limit := min(scaleDownLimit(n.currentReplicas, h.scaleUpEvents, h.scaleDownEvents, n.rules.down, now), n.currentReplicas)
		minAllowed, reason, message := n.minReplicas, "TooFewReplicas", msgTooFewReplicas
		if minAllowed < limit {
			minAllowed, reason, message = limit, "ScaleDownLimit", msgScaleDownLimit
		}
		if n.desiredReplicas < minAllowed {
			return minAllowed, reason, message
		}
	}
	return n.desiredReplicas, "DesiredWithinRange", msgDesiredWithinRange
}

// replicasChangedWithin sums the changes of the events of the last period.
func replicasChangedWithin(periodSeconds int32, events []timestampedScaleEvent, now time.Time) int32 {
	cutoff := now.Add(-time.Duration(periodSeconds) * time.Second)
	var replicas int32
	for _, e := range events {
		if e.timestamp.After(cutoff) {
			replicas += e.replicaChange
		}
	}
	return replicas
}

// scaleUpLimit is the most replicas the policies allow now: each policy
// allows its value (pods, or percent) above the count at the start of its
// period; selectPolicy Max takes the most permissive, Min the least,
// Disabled allows none.
func scaleUpLimit(current int32, upEvents, downEvents []timestampedScaleEvent, rules *autoscalingv2.HPAScalingRules, now time.Time) int32 {
	var result int32
	pick := func(a, b int32) int32 { return max(a, b) }
	switch *rules.SelectPolicy {
	case autoscalingv2.DisabledPolicySelect:
		return current
	case autoscalingv2.MinChangePolicySelect:
		result, pick = math.MaxInt32, func(a, b int32) int32 { return min(a, b) }
	default:
		result = math.MinInt32
	}
	for _, p := range rules.Policies {
		periodStart := current - replicasChangedWithin(p.PeriodSeconds, upEvents, now) + replicasChangedWithin(p.PeriodSeconds, downEvents, now)
		var proposed int32
		switch p.Type {
		case autoscalingv2.PodsScalingPolicy:
			proposed = periodStart + p.Value
		case autoscalingv2.PercentScalingPolicy:
			// Rounded up, or a small target could never grow.
			proposed = int32(math.Ceil(float64(periodStart) * (1 + float64(p.Value)/100)))
		}
		result = pick(result, proposed)
	}
	return result
}

// scaleDownLimit is the fewest replicas the policies allow now.
func scaleDownLimit(current int32, upEvents, downEvents []timestampedScaleEvent, rules *autoscalingv2.HPAScalingRules, now time.Time) int32 {
	var result int32
	pick := func(a, b int32) int32 { return min(a, b) }
	switch *rules.SelectPolicy {
	case autoscalingv2.DisabledPolicySelect:
		return current
	case autoscalingv2.MinChangePolicySelect:
		result, pick = math.MinInt32, func(a, b int32) int32 { return max(a, b) }
	default:
		result = math.MaxInt32
	}
	for _, p := range rules.Policies {
		periodStart := current - replicasChangedWithin(p.PeriodSeconds, upEvents, now) + replicasChangedWithin(p.PeriodSeconds, downEvents, now)
		var proposed int32
		switch p.Type {
		case autoscalingv2.PodsScalingPolicy:
			proposed = periodStart - p.Value
		case autoscalingv2.PercentScalingPolicy:
			proposed = int32(float64(periodStart) * (1 - float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return result
}

// storeScaleEvent remembers a change of scale, for the policies' periods,
// in the place of an event older than the longest period if there is one.
// HPAs without a behavior keep none.
func (h *hpaHistory) storeScaleEvent(rules *scaleRules, prev, next int32, now time.Time) {
	if rules == nil || prev == next {
		return
	}
	events, r, change := &h.scaleUpEvents, rules.up, next-prev
	if next < prev {
		events, r, change = &h.scaleDownEvents, rules.down, prev-next
	}
	var longest int32
	for _, p := range r.Policies {
		longest = max(longest, p.PeriodSeconds)
	}
	cutoff := now.Add(-time.Duration(longest) * time.Second)
	reuse := -1
	for i := range *events {
		if (*events)[i].timestamp.Before(cutoff) {
			(*events)[i].outdated = true
		}
		if (*events)[i].outdated {
			reuse = i
		}
	}
	e := timestampedScaleEvent{replicaChange: change, timestamp: now}
	if reuse >= 0 {
		(*events)[reuse] = e
	} else {
		*events = append(*events, e)
	}
}

// rulesOf completes an HPA's behavior (nil without one): the server's
// defaults have set every field but the scale-down window, which is the
// controller's; nil fields of objects stored otherwise take the same
// defaults.
func rulesOf(b *autoscalingv2.HorizontalPodAutoscalerBehavior, downscaleStabilization time.Duration) *scaleRules {
	if b == nil {
		return nil
	}
	maxPolicy := autoscalingv2.MaxChangePolicySelect
	complete := func(r *autoscalingv2.HPAScalingRules, window int32, policies []autoscalingv2.HPAScalingPolicy) *autoscalingv2.HPAScalingRules {
		out := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &window, SelectPolicy: &maxPolicy, Policies: policies}
		if r == nil {
			return out
		}
		if r.StabilizationWindowSeconds != nil {
			out.StabilizationWindowSeconds = r.StabilizationWindowSeconds
		}
		if r.SelectPolicy != nil {
			out.SelectPolicy = r.SelectPolicy
		}
		if r.Policies != nil {
			out.Policies = r.Policies
		}
		out.Tolerance = r.Tolerance
		return out
	}
	return &scaleRules{
		up: complete(b.ScaleUp, 0, []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		}),
		down: complete(b.ScaleDown, int32(downscaleStabilization/time.Second), []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		}),
	}
}
