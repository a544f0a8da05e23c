package strategy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidatePodCreate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *corev1.Pod)
		want   []wantErr
	}{
		{"valid", func(p *corev1.Pod) {}, nil},
		{"name missing", func(p *corev1.Pod) { p.Name = "" },
			[]wantErr{{field.ErrorTypeRequired, "metadata.name", "name or generateName is required"}}},
		{"name not a subdomain", func(p *corev1.Pod) { p.Name = "Web_1" },
			[]wantErr{{field.ErrorTypeInvalid, "metadata.name", "RFC 1123 subdomain"}}},
		{"generateName invalid", func(p *corev1.Pod) { p.GenerateName = "Bad_" },
			[]wantErr{{field.ErrorTypeInvalid, "metadata.generateName", ""}}},
		{"namespace missing", func(p *corev1.Pod) { p.Namespace = "" },
			[]wantErr{{field.ErrorTypeRequired, "metadata.namespace", ""}}},
		{"label value invalid", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "-x-"} },
			[]wantErr{{field.ErrorTypeInvalid, "metadata.labels", "a valid label must be"}}},
		{"annotation key invalid", func(p *corev1.Pod) { p.Annotations = map[string]string{"a b": "x"} },
			[]wantErr{{field.ErrorTypeInvalid, "metadata.annotations", ""}}},
		{"annotations too large", func(p *corev1.Pod) { p.Annotations = map[string]string{"big": strings.Repeat("x", 256*1024)} },
			[]wantErr{{field.ErrorTypeTooLong, "metadata.annotations", ""}}},
		{"finalizer not qualified", func(p *corev1.Pod) { p.Finalizers = []string{"mine"} },
			[]wantErr{{field.ErrorTypeInvalid, "metadata.finalizers[0]", "neither a standard finalizer name nor is it fully qualified"}}},
		{"owner reference incomplete", func(p *corev1.Pod) { p.OwnerReferences = append(p.OwnerReferences, ownerRef("")) },
			[]wantErr{{field.ErrorTypeRequired, "metadata.ownerReferences[0].uid", ""}}},
		{"no containers", func(p *corev1.Pod) { p.Spec.Containers = nil },
			[]wantErr{{field.ErrorTypeRequired, "spec.containers", ""}}},
		{"container name missing", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "" },
			[]wantErr{{field.ErrorTypeRequired, "spec.containers[0].name", ""}}},
		{"container name not a label", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "Web.1" },
			[]wantErr{{field.ErrorTypeInvalid, "spec.containers[0].name", "RFC 1123 label"}}},
		{"container names repeat", func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0]) },
			[]wantErr{{field.ErrorTypeDuplicate, "spec.containers[1].name", ""}}},
		{"init container reuses container name", func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{p.Spec.Containers[0]} },
			[]wantErr{{field.ErrorTypeDuplicate, "spec.initContainers[0].name", ""}}},
		{"image missing", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" },
			[]wantErr{{field.ErrorTypeRequired, "spec.containers[0].image", ""}}},
		{"image padded", func(p *corev1.Pod) { p.Spec.Containers[0].Image = " nginx" },
			[]wantErr{{field.ErrorTypeInvalid, "spec.containers[0].image", "must not have leading or trailing whitespace"}}},
		{"pull policy unknown", func(p *corev1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.containers[0].imagePullPolicy", `"Always", "IfNotPresent", "Never"`}}},
		{"port zero", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 0 },
			[]wantErr{{field.ErrorTypeRequired, "spec.containers[0].ports[0].containerPort", ""}}},
		{"port too high", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 70000 },
			[]wantErr{{field.ErrorTypeInvalid, "spec.containers[0].ports[0].containerPort", "must be between 1 and 65535, inclusive"}}},
		{"host port too high", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].HostPort = 65536 },
			[]wantErr{{field.ErrorTypeInvalid, "spec.containers[0].ports[0].hostPort", "must be between 1 and 65535"}}},
		{"port protocol unknown", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = "ICMP" },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.containers[0].ports[0].protocol", `"SCTP", "TCP", "UDP"`}}},
		{"port names repeat", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: "http", ContainerPort: 81, Protocol: "TCP"})
		}, []wantErr{{field.ErrorTypeDuplicate, "spec.containers[0].ports[1].name", ""}}},
		{"host ports collide", func(p *corev1.Pod) {
			c := p.Spec.Containers[0]
			c.Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: "TCP"}}
			d := *c.DeepCopy()
			d.Name = "other"
			p.Spec.Containers = []corev1.Container{c, d}
		}, []wantErr{{field.ErrorTypeDuplicate, "spec.containers[1].ports[0].hostPort", ""}}},
		{"env name missing", func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Value: "x"}} },
			[]wantErr{{field.ErrorTypeRequired, "spec.containers[0].env[0].name", ""}}},
		{"env name with equals", func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A=B"}} },
			[]wantErr{{field.ErrorTypeInvalid, "spec.containers[0].env[0].name", ""}}},
		{"env field ref unsupported", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.schedulerName"}}}}
		}, []wantErr{{field.ErrorTypeNotSupported, "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath", ""}}},
		{"env value and valueFrom", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "x", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.containers[0].env[0].valueFrom", "may not be specified when `value` is not empty"}}},
		{"env secret key invalid", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "a/b"}}}}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.containers[0].env[0].valueFrom.secretKeyRef.key", ""}}},
		{"requests above limits", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.containers[0].resources.requests", "must be less than or equal to cpu limit of 100m"}}},
		{"negative quantity", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1Mi")}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.containers[0].resources.requests[memory]", "must be greater than or equal to 0"}}},
		{"unknown resource", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"gpu": resource.MustParse("1")}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.containers[0].resources.limits[gpu]", "must be a standard resource for containers"}}},
		{"extended resource request without limit", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}
		}, []wantErr{{field.ErrorTypeRequired, "spec.containers[0].resources.limits", "Limit must be set for non overcommitable resources"}}},
		{"extended resource fraction", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/gpu": resource.MustParse("500m")}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.containers[0].resources.limits[example.com/gpu]", "must be an integer"}}},
		{"volume names repeat", func(p *corev1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, p.Spec.Volumes[0]) },
			[]wantErr{{field.ErrorTypeDuplicate, "spec.volumes[1].name", ""}}},
		{"volume name not a label", func(p *corev1.Pod) { p.Spec.Volumes[0].Name = "Data" },
			[]wantErr{{field.ErrorTypeInvalid, "spec.volumes[0].name", ""}}},
		{"volume with two sources", func(p *corev1.Pod) {
			p.Spec.Volumes[0].HostPath = &corev1.HostPathVolumeSource{Path: "/x"}
		}, []wantErr{{field.ErrorTypeForbidden, "spec.volumes[0].hostPath", "may not specify more than 1 volume type"}}},
		{"host path with backsteps", func(p *corev1.Pod) {
			p.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/a/../b"}}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.volumes[0].hostPath.path", "must not contain '..'"}}},
		{"config map name missing", func(p *corev1.Pod) {
			p.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{DefaultMode: ptrTo(int32(0644))}}
		}, []wantErr{{field.ErrorTypeRequired, "spec.volumes[0].configMap.name", ""}}},
		{"secret mode too large", func(p *corev1.Pod) {
			p.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: ptrTo(int32(01000))}}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.volumes[0].secret.defaultMode", "must be a number between 0 and 0777"}}},
		{"mount of unknown volume", func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "nope", MountPath: "/x"}}
		}, []wantErr{{field.ErrorTypeNotFound, "spec.containers[0].volumeMounts[0].name", ""}}},
		{"mount path missing", func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data"}}
		}, []wantErr{{field.ErrorTypeRequired, "spec.containers[0].volumeMounts[0].mountPath", ""}}},
		{"mount paths repeat", func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/x"}, {Name: "data", MountPath: "/x"}}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.containers[0].volumeMounts[1].mountPath", "must be unique"}}},
		{"restart policy unknown", func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.restartPolicy", `"Always", "OnFailure", "Never"`}}},
		{"dns policy unknown", func(p *corev1.Pod) { p.Spec.DNSPolicy = "Google" },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.dnsPolicy", ""}}},
		{"dns none without config", func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone },
			[]wantErr{{field.ErrorTypeRequired, "spec.dnsConfig", "must provide `dnsConfig` when `dnsPolicy` is None"}}},
		{"node selector invalid", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/arch": "arm 64"} },
			[]wantErr{{field.ErrorTypeInvalid, "spec.nodeSelector", ""}}},
		{"node name invalid", func(p *corev1.Pod) { p.Spec.NodeName = "Pi_1" },
			[]wantErr{{field.ErrorTypeInvalid, "spec.nodeName", ""}}},
		{"grace period missing", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = nil },
			[]wantErr{{field.ErrorTypeRequired, "spec.terminationGracePeriodSeconds", ""}}},
		{"active deadline zero", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptrTo(int64(0)) },
			[]wantErr{{field.ErrorTypeInvalid, "spec.activeDeadlineSeconds", "must be between 1 and 2147483647"}}},
		{"probe without handler", func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
		}, []wantErr{{field.ErrorTypeRequired, "spec.containers[0].livenessProbe", "must specify a handler type"}}},
		{"liveness success threshold", func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}},
				TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 2, FailureThreshold: 3}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.containers[0].livenessProbe.successThreshold", "must be 1"}}},
		{"probe named port invalid", func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("HTTP_PORT"), Scheme: "HTTP"}},
				TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.containers[0].readinessProbe.httpGet.port", ""}}},
		{"init container with probe", func(p *corev1.Pod) {
			ic := corev1.Container{Name: "init", Image: "busybox", ImagePullPolicy: "Always", TerminationMessagePolicy: "File",
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}
			p.Spec.InitContainers = []corev1.Container{ic}
		}, []wantErr{{field.ErrorTypeForbidden, "spec.initContainers[0].readinessProbe", "may not be set for init containers without restartPolicy=Always"}}},
		{"toleration without key must exist", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpEqual, Value: "x"})
		}, []wantErr{{field.ErrorTypeInvalid, "spec.tolerations[2].operator", "operator must be Exists when `key` is empty"}}},
		{"ephemeral containers on create", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg", Image: "busybox"}}}
		}, []wantErr{{field.ErrorTypeForbidden, "spec.ephemeralContainers", "cannot be set on create"}}},
		{"host network host port mismatch", func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports[0].HostPort = 8080
		}, []wantErr{{field.ErrorTypeInvalid, "spec.containers[0].ports[0].hostPort", "must match `containerPort` when `hostNetwork` is true"}}},
		{"preemption policy unknown", func(p *corev1.Pod) { p.Spec.PreemptionPolicy = ptrTo(corev1.PreemptionPolicy("Always")) },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.preemptionPolicy", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPod()
			tt.mutate(p)
			checkErrs(t, ValidateCreate(p), tt.want...)
		})
	}
}

func TestValidatePodUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *corev1.Pod)
		want   []wantErr
	}{
		{"same", func(p *corev1.Pod) {}, nil},
		{"image may change", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:1.26" }, nil},
		{"labels may change", func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"} }, nil},
		{"toleration may be added", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "k", Operator: "Exists"})
		}, nil},
		{"active deadline may be lowered", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptrTo(int64(30)) }, nil},
		{"restart policy is immutable", func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever },
			[]wantErr{{field.ErrorTypeForbidden, "spec", "pod updates may not change fields other than `spec.containers[*].image`"}}},
		{"ports are immutable", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 81 },
			[]wantErr{{field.ErrorTypeForbidden, "spec", "containers"}}},
		{"containers may not be added", func(p *corev1.Pod) {
			c := p.Spec.Containers[0]
			c.Name = "two"
			c.Ports = nil
			p.Spec.Containers = append(p.Spec.Containers, c)
		}, []wantErr{{field.ErrorTypeForbidden, "spec.containers", "pod updates may not add or remove containers"}}},
		{"toleration may not be removed", func(p *corev1.Pod) { p.Spec.Tolerations = p.Spec.Tolerations[:1] },
			[]wantErr{{field.ErrorTypeForbidden, "spec.tolerations", "existing toleration can not be modified except its tolerationSeconds"}}},
		{"name is immutable", func(p *corev1.Pod) { p.Name = "other" },
			[]wantErr{{field.ErrorTypeInvalid, "metadata.name", "field is immutable"}}},
		{"resource version required", func(p *corev1.Pod) { p.ResourceVersion = "" },
			[]wantErr{{field.ErrorTypeInvalid, "metadata.resourceVersion", "must be specified for an update"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := validPod()
			old.Spec.ActiveDeadlineSeconds = ptrTo(int64(60))
			p := old.DeepCopy()
			tt.mutate(p)
			checkErrs(t, ValidateUpdate(p, old), tt.want...)
		})
	}
}

func TestValidatePodStatusUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *corev1.Pod)
		want   []wantErr
	}{
		{"phase may change", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, nil},
		{"node name may not change", func(p *corev1.Pod) { p.Spec.NodeName = "pi-2" },
			[]wantErr{{field.ErrorTypeForbidden, "status.nodeName", "may not be changed directly"}}},
		{"pod IP invalid", func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.300"}} },
			[]wantErr{{field.ErrorTypeInvalid, "status.podIPs[0]", ""}}},
		{"two IPv4 pod IPs", func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.3"}, {IP: "10.0.0.4"}} },
			[]wantErr{{field.ErrorTypeInvalid, "status.podIPs", "may specify no more than one IP for each IP family"}}},
		{"qos class immutable", func(p *corev1.Pod) { p.Status.QOSClass = corev1.PodQOSGuaranteed },
			[]wantErr{{field.ErrorTypeInvalid, "status.qosClass", "field is immutable"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := validPod()
			old.Status.QOSClass = corev1.PodQOSBestEffort
			p := old.DeepCopy()
			tt.mutate(p)
			checkErrs(t, ValidateStatusUpdate(p, old), tt.want...)
		})
	}
}
