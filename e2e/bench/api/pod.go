package main

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// templateHash stands in for the pod-template-hash a ReplicaSet would set.
const templateHash = "6d8f7b9c54"

// podName is the i-th Pod's name, shaped like a ReplicaSet's Pods'
// (NAME-HASH-xxxxx), distinct for every i below 27^5.
func podName(i int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"   // Kubernetes' rand.String alphabet
	n := (i*7919 + 12345) % (27 * 27 * 27 * 27 * 27) // 7919 is prime to 27: a bijection
	var s [5]byte
	for j := range s {
		s[j] = alphabet[n%27]
		n /= 27
	}
	return "web-" + templateHash + "-" + string(s[:])
}

// podBody is the JSON of a Pod as a Deployment's ReplicaSet would create
// it, without the ownerReference (no ReplicaSet exists, and the garbage
// collector would delete the Pod) and not yet scheduled (no nodeName): one
// container with image, ports, env, requests and limits, a readiness probe
// and a volume mount; about 2 KiB of JSON.
func podBody(name string) ([]byte, error) {
	p := corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{"app": "bench", "pod-template-hash": templateHash, "tier": "frontend"},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/restartedAt": "2025-01-01T00:00:00Z",
				"prometheus.io/scrape":              "true",
				"prometheus.io/port":                "9090",
				"prometheus.io/path":                "/metrics",
			},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "web",
				Image: "registry.example.com/bench/web:1.27.3",
				Args:  []string{"--listen=:8080", "--metrics=:9090", "--config=/etc/web/config.yaml"},
				Ports: []corev1.ContainerPort{
					{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
					{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
				},
				Env: []corev1.EnvVar{
					{Name: "LOG_LEVEL", Value: "info"},
					{Name: "CACHE_SIZE_MB", Value: "64"},
					{Name: "UPSTREAM_URL", Value: "http://api.default.svc.cluster.local:8080"},
					{Name: "FEATURE_FLAGS", Value: "compression,etag,request-id"},
					{Name: "SESSION_TTL", Value: "30m"},
					{Name: "MAX_CONNECTIONS", Value: "512"},
					{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://otel-collector.monitoring.svc.cluster.local:4317"},
					{Name: "OTEL_SERVICE_NAME", Value: "web"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
					{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Path: "/healthz", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}},
					InitialDelaySeconds: 5, PeriodSeconds: 10, TimeoutSeconds: 2, SuccessThreshold: 1, FailureThreshold: 3,
				},
				VolumeMounts:    []corev1.VolumeMount{{Name: "config", MountPath: "/etc/web", ReadOnly: true}},
				ImagePullPolicy: corev1.PullIfNotPresent,
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}}},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr(int64(30)),
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            "default",
			SecurityContext:               &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(10001))},
		},
	}
	b, err := json.Marshal(&p)
	if err != nil {
		return nil, fmt.Errorf("encode pod %s: %w", name, err)
	}
	return b, nil
}

func ptr[T any](v T) *T { return &v }
