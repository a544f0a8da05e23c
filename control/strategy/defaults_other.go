package strategy

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Defaults of the types outside core/v1, apps/v1 and batch/v1.

// defaultCPUUtilization is the target of an HPA that names no metric.
const defaultCPUUtilization int32 = 80

func defaultHPAv2(h *autoscalingv2.HorizontalPodAutoscaler) {
	if h.Spec.MinReplicas == nil {
		h.Spec.MinReplicas = ptrTo(int32(1))
	}
	if len(h.Spec.Metrics) == 0 {
		h.Spec.Metrics = []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{
					Type:               autoscalingv2.UtilizationMetricType,
					AverageUtilization: ptrTo(defaultCPUUtilization),
				},
			},
		}}
	}
	// A behavior that is given is completed: every unset rule field takes
	// the value of the built-in scale-up or scale-down rules.
	if b := h.Spec.Behavior; b != nil {
		b.ScaleUp = mergeScalingRules(b.ScaleUp, defaultScaleUpRules())
		b.ScaleDown = mergeScalingRules(b.ScaleDown, defaultScaleDownRules())
	}
}

// defaultScaleUpRules: no stabilization, at most 4 pods or 100% per 15s.
func defaultScaleUpRules() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptrTo(int32(0)),
		SelectPolicy:               ptrTo(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// defaultScaleDownRules: 100% per 15s; the stabilization window stays unset
// (the controller's flag decides it).
func defaultScaleDownRules() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		SelectPolicy: ptrTo(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// mergeScalingRules copies the set fields of from over def.
func mergeScalingRules(from, def *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if from == nil {
		return def
	}
	if from.SelectPolicy != nil {
		def.SelectPolicy = from.SelectPolicy
	}
	if from.StabilizationWindowSeconds != nil {
		def.StabilizationWindowSeconds = from.StabilizationWindowSeconds
	}
	if from.Policies != nil {
		def.Policies = from.Policies
	}
	if from.Tolerance != nil {
		def.Tolerance = from.Tolerance
	}
	return def
}

// defaultHPAv1 defaults minReplicas; the CPU target stays as given.
func defaultHPAv1(h *autoscalingv1.HorizontalPodAutoscaler) {
	if h.Spec.MinReplicas == nil {
		h.Spec.MinReplicas = ptrTo(int32(1))
	}
}

func defaultStorageClass(sc *storagev1.StorageClass) {
	if sc.ReclaimPolicy == nil {
		sc.ReclaimPolicy = ptrTo(corev1.PersistentVolumeReclaimDelete)
	}
	if sc.VolumeBindingMode == nil {
		sc.VolumeBindingMode = ptrTo(storagev1.VolumeBindingImmediate)
	}
}

// defaultIngressClass scopes parameters without a scope to the cluster.
func defaultIngressClass(ic *networkingv1.IngressClass) {
	if p := ic.Spec.Parameters; p != nil && p.Scope == nil {
		p.Scope = ptrTo(networkingv1.IngressClassParametersReferenceScopeCluster)
	}
}

// defaultNetworkPolicy gives ports TCP and a policy without policyTypes
// Ingress, and Egress if it has egress rules.
func defaultNetworkPolicy(np *networkingv1.NetworkPolicy) {
	ports := func(ps []networkingv1.NetworkPolicyPort) {
		for i := range ps {
			if ps[i].Protocol == nil {
				ps[i].Protocol = ptrTo(corev1.ProtocolTCP)
			}
		}
	}
	for i := range np.Spec.Ingress {
		ports(np.Spec.Ingress[i].Ports)
	}
	for i := range np.Spec.Egress {
		ports(np.Spec.Egress[i].Ports)
	}
	if len(np.Spec.PolicyTypes) == 0 {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) > 0 {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
}

func defaultEndpointSlice(es *discoveryv1.EndpointSlice) {
	for i := range es.Ports {
		if es.Ports[i].Name == nil {
			es.Ports[i].Name = ptrTo("")
		}
		if es.Ports[i].Protocol == nil {
			es.Ports[i].Protocol = ptrTo(corev1.ProtocolTCP)
		}
	}
}
