package strategy

import (
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func validPVC() *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: objMeta("data"), Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	Default(pvc)
	return pvc
}

func TestValidatePersistentVolumeClaim(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *corev1.PersistentVolumeClaim)
		want   []wantErr
	}{
		{"valid", func(p *corev1.PersistentVolumeClaim) {}, nil},
		{"access modes missing", func(p *corev1.PersistentVolumeClaim) { p.Spec.AccessModes = nil },
			[]wantErr{{field.ErrorTypeRequired, "spec.accessModes", "at least 1 access mode is required"}}},
		{"access mode unknown", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadWriteAll"}
		},
			[]wantErr{{field.ErrorTypeNotSupported, "spec.accessModes", ""}}},
		{"ReadWriteOncePod with others", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadWriteOnce}
		}, []wantErr{{field.ErrorTypeForbidden, "spec.accessModes", "may not use ReadWriteOncePod with other access modes"}}},
		{"storage request missing", func(p *corev1.PersistentVolumeClaim) { p.Spec.Resources.Requests = nil },
			[]wantErr{{field.ErrorTypeRequired, "spec.resources[storage]", ""}}},
		{"storage request zero", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("0")
		}, []wantErr{{field.ErrorTypeInvalid, "spec.resources[storage]", "must be greater than zero"}}},
		{"volume mode unknown", func(p *corev1.PersistentVolumeClaim) { p.Spec.VolumeMode = ptrTo(corev1.PersistentVolumeMode("Raw")) },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.volumeMode", ""}}},
		{"storage class name invalid", func(p *corev1.PersistentVolumeClaim) { p.Spec.StorageClassName = ptrTo("Fast_SSD") },
			[]wantErr{{field.ErrorTypeInvalid, "spec.storageClassName", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPVC()
			tt.mutate(p)
			checkErrs(t, ValidateCreate(p), tt.want...)
		})
	}
}

func TestValidatePersistentVolumeClaimUpdate(t *testing.T) {
	tests := []struct {
		name   string
		bound  bool
		mutate func(p *corev1.PersistentVolumeClaim)
		want   []wantErr
	}{
		{"bound claim may grow", true, func(p *corev1.PersistentVolumeClaim) {
			p.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
		}, nil},
		{"bound claim may not shrink below capacity", true, func(p *corev1.PersistentVolumeClaim) {
			p.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("512Mi")
		}, []wantErr{{field.ErrorTypeForbidden, "spec.resources.requests.storage", "field can not be less than status.capacity"}}},
		{"unbound claim may not resize", false, func(p *corev1.PersistentVolumeClaim) {
			p.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
		}, []wantErr{{field.ErrorTypeForbidden, "spec", "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"}}},
		{"access modes are immutable", true, func(p *corev1.PersistentVolumeClaim) {
			p.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		}, []wantErr{{field.ErrorTypeForbidden, "spec", "spec is immutable after creation"}}},
		{"volume name may be set once", false, func(p *corev1.PersistentVolumeClaim) { p.Spec.VolumeName = "pv1" }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := validPVC()
			if tt.bound {
				old.Spec.VolumeName = "pv1"
				old.Status.Phase = corev1.ClaimBound
				old.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
			}
			p := old.DeepCopy()
			tt.mutate(p)
			checkErrs(t, ValidateUpdate(p, old), tt.want...)
		})
	}
}

func validPV() *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1", ResourceVersion: "1"}, Spec: corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/pv1"}},
	}}
	Default(pv)
	return pv
}

func TestValidatePersistentVolume(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *corev1.PersistentVolume)
		want   []wantErr
	}{
		{"valid", func(p *corev1.PersistentVolume) {}, nil},
		{"access modes missing", func(p *corev1.PersistentVolume) { p.Spec.AccessModes = nil },
			[]wantErr{{field.ErrorTypeRequired, "spec.accessModes", ""}}},
		{"capacity missing", func(p *corev1.PersistentVolume) { p.Spec.Capacity = nil },
			[]wantErr{{field.ErrorTypeRequired, "spec.capacity", ""}}},
		{"capacity not storage", func(p *corev1.PersistentVolume) {
			p.Spec.Capacity = corev1.ResourceList{"cpu": resource.MustParse("1")}
		},
			[]wantErr{{field.ErrorTypeNotSupported, "spec.capacity", `"storage"`}}},
		{"capacity zero", func(p *corev1.PersistentVolume) { p.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("0") },
			[]wantErr{{field.ErrorTypeInvalid, "spec.capacity[storage]", "must be greater than zero"}}},
		{"no source", func(p *corev1.PersistentVolume) { p.Spec.HostPath = nil },
			[]wantErr{{field.ErrorTypeRequired, "spec", "must specify a volume type"}}},
		{"local without node affinity", func(p *corev1.PersistentVolume) {
			p.Spec.HostPath = nil
			p.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt/disk"}
		}, []wantErr{{field.ErrorTypeRequired, "spec.nodeAffinity", "Local volume requires node affinity"}}},
		{"reclaim policy unknown", func(p *corev1.PersistentVolume) { p.Spec.PersistentVolumeReclaimPolicy = "Keep" },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.persistentVolumeReclaimPolicy", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPV()
			tt.mutate(p)
			checkErrs(t, ValidateCreate(p), tt.want...)
		})
	}
	t.Run("source is immutable", func(t *testing.T) {
		old := validPV()
		p := old.DeepCopy()
		p.Spec.HostPath.Path = "/srv/other"
		checkErrs(t, ValidateUpdate(p, old), wantErr{field.ErrorTypeForbidden, "spec.persistentvolumesource", "spec.persistentvolumesource is immutable after creation"})
	})
	t.Run("volume mode is immutable", func(t *testing.T) {
		old := validPV()
		p := old.DeepCopy()
		p.Spec.VolumeMode = ptrTo(corev1.PersistentVolumeBlock)
		checkErrs(t, ValidateUpdate(p, old), wantErr{field.ErrorTypeInvalid, "volumeMode", "field is immutable"})
	})
	t.Run("reclaim policy may change", func(t *testing.T) {
		old := validPV()
		p := old.DeepCopy()
		p.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
		checkErrs(t, ValidateUpdate(p, old))
	})
}

func validStorageClass() *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local", ResourceVersion: "1"}, Provisioner: "isle.dev/local",
		Parameters: map[string]string{"path": "/srv"}}
	Default(sc)
	return sc
}

func TestValidateStorageClass(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(sc *storagev1.StorageClass)
		want   []wantErr
	}{
		{"valid", func(sc *storagev1.StorageClass) {}, nil},
		{"provisioner missing", func(sc *storagev1.StorageClass) { sc.Provisioner = "" },
			[]wantErr{{field.ErrorTypeRequired, "provisioner", ""}}},
		{"provisioner invalid", func(sc *storagev1.StorageClass) { sc.Provisioner = "isle dev" },
			[]wantErr{{field.ErrorTypeInvalid, "provisioner", ""}}},
		{"reclaim policy recycle", func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = ptrTo(corev1.PersistentVolumeReclaimRecycle) },
			[]wantErr{{field.ErrorTypeNotSupported, "reclaimPolicy", `"Delete", "Retain"`}}},
		{"binding mode unknown", func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = ptrTo(storagev1.VolumeBindingMode("Later")) },
			[]wantErr{{field.ErrorTypeNotSupported, "volumeBindingMode", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := validStorageClass()
			tt.mutate(sc)
			checkErrs(t, ValidateCreate(sc), tt.want...)
		})
	}
	updates := []struct {
		name   string
		mutate func(sc *storagev1.StorageClass)
		want   []wantErr
	}{
		{"labels may change", func(sc *storagev1.StorageClass) { sc.Labels = map[string]string{"default": "yes"} }, nil},
		{"parameters are immutable", func(sc *storagev1.StorageClass) { sc.Parameters["path"] = "/data" },
			[]wantErr{{field.ErrorTypeForbidden, "parameters", "updates to parameters are forbidden."}}},
		{"provisioner is immutable", func(sc *storagev1.StorageClass) { sc.Provisioner = "isle.dev/nfs" },
			[]wantErr{{field.ErrorTypeForbidden, "provisioner", "updates to provisioner are forbidden."}}},
		{"reclaim policy is immutable", func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = ptrTo(corev1.PersistentVolumeReclaimRetain) },
			[]wantErr{{field.ErrorTypeInvalid, "reclaimPolicy", "field is immutable"}}},
	}
	for _, tt := range updates {
		t.Run("update "+tt.name, func(t *testing.T) {
			old := validStorageClass()
			sc := old.DeepCopy()
			tt.mutate(sc)
			checkErrs(t, ValidateUpdate(sc, old), tt.want...)
		})
	}
}

func validIngress() *networkingv1.Ingress {
	return &networkingv1.Ingress{ObjectMeta: objMeta("web"), Spec: networkingv1.IngressSpec{
		IngressClassName: ptrTo("isle"),
		Rules: []networkingv1.IngressRule{{Host: "web.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptrTo(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
		}}}},
	}}
}

func TestValidateIngress(t *testing.T) {
	path0 := func(i *networkingv1.Ingress) *networkingv1.HTTPIngressPath { return &i.Spec.Rules[0].HTTP.Paths[0] }
	tests := []struct {
		name   string
		mutate func(i *networkingv1.Ingress)
		want   []wantErr
	}{
		{"valid", func(i *networkingv1.Ingress) {}, nil},
		{"no rules nor default backend", func(i *networkingv1.Ingress) { i.Spec.Rules = nil },
			[]wantErr{{field.ErrorTypeInvalid, "spec", "either `defaultBackend` or `rules` must be specified"}}},
		{"path type missing", func(i *networkingv1.Ingress) { path0(i).PathType = nil },
			[]wantErr{{field.ErrorTypeRequired, "spec.rules[0].http.paths[0].pathType", "pathType must be specified"}}},
		{"path type unknown", func(i *networkingv1.Ingress) { path0(i).PathType = ptrTo(networkingv1.PathType("Regex")) },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.rules[0].http.paths[0].pathType", `"Exact", "ImplementationSpecific", "Prefix"`}}},
		{"path not absolute", func(i *networkingv1.Ingress) { path0(i).Path = "api" },
			[]wantErr{{field.ErrorTypeInvalid, "spec.rules[0].http.paths[0].path", "must be an absolute path"}}},
		{"path with double slash", func(i *networkingv1.Ingress) { path0(i).Path = "/a//b" },
			[]wantErr{{field.ErrorTypeInvalid, "spec.rules[0].http.paths[0].path", "must not contain '//'"}}},
		{"paths empty", func(i *networkingv1.Ingress) { i.Spec.Rules[0].HTTP.Paths = nil },
			[]wantErr{{field.ErrorTypeRequired, "spec.rules[0].http.paths", ""}}},
		{"backend service name missing", func(i *networkingv1.Ingress) { path0(i).Backend.Service.Name = "" },
			[]wantErr{{field.ErrorTypeRequired, "spec.rules[0].http.paths[0].backend.service.name", ""}}},
		{"backend port missing", func(i *networkingv1.Ingress) { path0(i).Backend.Service.Port = networkingv1.ServiceBackendPort{} },
			[]wantErr{{field.ErrorTypeRequired, "spec.rules[0].http.paths[0].backend", "port name or number is required"}}},
		{"backend port name and number", func(i *networkingv1.Ingress) { path0(i).Backend.Service.Port.Name = "http" },
			[]wantErr{{field.ErrorTypeInvalid, "spec.rules[0].http.paths[0].backend", "cannot set both port name & port number"}}},
		{"backend missing", func(i *networkingv1.Ingress) { path0(i).Backend = networkingv1.IngressBackend{} },
			[]wantErr{{field.ErrorTypeInvalid, "spec.rules[0].http.paths[0].backend", "resource or service backend is required"}}},
		{"host is an IP", func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "10.0.0.1" },
			[]wantErr{{field.ErrorTypeInvalid, "spec.rules[0].host", "must be a DNS name, not an IP address"}}},
		{"wildcard host", func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "*.example.com" }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := validIngress()
			tt.mutate(i)
			checkErrs(t, ValidateCreate(i), tt.want...)
		})
	}
}

func TestValidateIngressClass(t *testing.T) {
	ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "isle", ResourceVersion: "1"}, Spec: networkingv1.IngressClassSpec{Controller: "isle.dev/ingress"}}
	checkErrs(t, ValidateCreate(ic))
	bad := ic.DeepCopy()
	bad.Spec.Controller = ""
	checkErrs(t, ValidateCreate(bad), wantErr{field.ErrorTypeRequired, "spec.controller", ""})
	changed := ic.DeepCopy()
	changed.Spec.Controller = "isle.dev/other"
	checkErrs(t, ValidateUpdate(changed, ic), wantErr{field.ErrorTypeInvalid, "spec.controller", "field is immutable"})
}

func TestValidateEndpointSlice(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(es *discoveryv1.EndpointSlice)
		want   []wantErr
	}{
		{"valid", func(es *discoveryv1.EndpointSlice) {}, nil},
		{"address type missing", func(es *discoveryv1.EndpointSlice) { es.AddressType = "" },
			[]wantErr{{field.ErrorTypeRequired, "addressType", ""}}},
		{"address type unknown", func(es *discoveryv1.EndpointSlice) { es.AddressType = "IP" },
			[]wantErr{{field.ErrorTypeNotSupported, "addressType", `"FQDN", "IPv4", "IPv6"`}}},
		{"IPv6 address in IPv4 slice", func(es *discoveryv1.EndpointSlice) { es.Endpoints[0].Addresses = []string{"fd00::5"} },
			[]wantErr{{field.ErrorTypeInvalid, "endpoints[0].addresses[0]", "must be a valid IPv4 address"}}},
		{"address garbage", func(es *discoveryv1.EndpointSlice) { es.Endpoints[0].Addresses = []string{"ten"} },
			[]wantErr{{field.ErrorTypeInvalid, "endpoints[0].addresses[0]", ""}}},
		{"no addresses", func(es *discoveryv1.EndpointSlice) { es.Endpoints[0].Addresses = nil },
			[]wantErr{{field.ErrorTypeRequired, "endpoints[0].addresses", "must contain at least 1 address"}}},
		{"FQDN address", func(es *discoveryv1.EndpointSlice) {
			es.AddressType = discoveryv1.AddressTypeFQDN
			es.Endpoints[0].Addresses = []string{"db.example.com"}
		}, nil},
		{"port names repeat", func(es *discoveryv1.EndpointSlice) { es.Ports = append(es.Ports, es.Ports[0]) },
			[]wantErr{{field.ErrorTypeDuplicate, "ports[1].name", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es := &discoveryv1.EndpointSlice{ObjectMeta: objMeta("web-abc"), AddressType: discoveryv1.AddressTypeIPv4,
				Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.5"}}}, Ports: []discoveryv1.EndpointPort{{Port: ptrTo(int32(80))}}}
			Default(es)
			tt.mutate(es)
			checkErrs(t, ValidateCreate(es), tt.want...)
		})
	}
	t.Run("address type is immutable", func(t *testing.T) {
		old := &discoveryv1.EndpointSlice{ObjectMeta: objMeta("web-abc"), AddressType: discoveryv1.AddressTypeIPv4}
		es := old.DeepCopy()
		es.AddressType = discoveryv1.AddressTypeIPv6
		checkErrs(t, ValidateUpdate(es, old), wantErr{field.ErrorTypeInvalid, "addressType", "field is immutable"})
	})
}

func validHPA() *autoscalingv2.HorizontalPodAutoscaler {
	h := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: objMeta("web"), Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		MaxReplicas:    5,
	}}
	Default(h)
	return h
}

func TestValidateHPAv2(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(h *autoscalingv2.HorizontalPodAutoscaler)
		want   []wantErr
	}{
		{"valid", func(h *autoscalingv2.HorizontalPodAutoscaler) {}, nil},
		{"target kind missing", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.ScaleTargetRef.Kind = "" },
			[]wantErr{{field.ErrorTypeRequired, "spec.scaleTargetRef.kind", ""}}},
		{"target name missing", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.ScaleTargetRef.Name = "" },
			[]wantErr{{field.ErrorTypeRequired, "spec.scaleTargetRef.name", ""}}},
		{"min replicas zero", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptrTo(int32(0)) },
			[]wantErr{{field.ErrorTypeInvalid, "spec.minReplicas", "must be greater than or equal to 1"}}},
		{"max below min", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptrTo(int32(6)) },
			[]wantErr{{field.ErrorTypeInvalid, "spec.maxReplicas", "must be greater than or equal to `minReplicas`"}}},
		{"metric without source", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.Metrics[0].Resource = nil },
			[]wantErr{{field.ErrorTypeRequired, "spec.metrics[0].resource", "must populate information for the given metric source"}}},
		{"metric type unknown", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.Metrics[0].Type = "Magic" },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.metrics[0].type", ""}}},
		{"utilization zero", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics[0].Resource.Target.AverageUtilization = ptrTo(int32(0))
		},
			[]wantErr{{field.ErrorTypeInvalid, "spec.metrics[0].resource.target.averageUtilization", "must be greater than 0"}}},
		{"behavior policy period too long", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
				Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 3600}}}}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.behavior.scaleUp.policies[0].periodSeconds", "must be less than or equal to 1800"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := validHPA()
			tt.mutate(h)
			checkErrs(t, ValidateCreate(h), tt.want...)
		})
	}
}

func TestValidateHPAv1(t *testing.T) {
	h := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: objMeta("web"), Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "web"}, MaxReplicas: 3,
		TargetCPUUtilizationPercentage: ptrTo(int32(70))}}
	Default(h)
	checkErrs(t, ValidateCreate(h))
	h.Spec.MaxReplicas = 0
	h.Spec.TargetCPUUtilizationPercentage = ptrTo(int32(0))
	checkErrs(t, ValidateCreate(h),
		wantErr{field.ErrorTypeInvalid, "spec.maxReplicas", "must be greater than 0"},
		wantErr{field.ErrorTypeInvalid, "spec.targetCPUUtilizationPercentage", "must be greater than 0"})
}

func validNetworkPolicy() *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{ObjectMeta: objMeta("allow-web"), Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: ptrTo(intstr.FromInt32(80)), EndPort: ptrTo(int32(90))}, {Port: ptrTo(intstr.FromString("http"))}},
			From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}, NamespaceSelector: &metav1.LabelSelector{}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/16", Except: []string{"192.168.1.0/24"}}},
			},
		}},
	}}
	Default(np)
	return np
}

func TestDefaultNetworkPolicy(t *testing.T) {
	np := validNetworkPolicy()
	if got := np.Spec.PolicyTypes; len(got) != 1 || got[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("policyTypes of a policy with ingress rules only: %v, want [Ingress]", got)
	}
	if p := np.Spec.Ingress[0].Ports[1].Protocol; p == nil || *p != corev1.ProtocolTCP {
		t.Errorf("a port without protocol: %v, want TCP", p)
	}
	eg := &networkingv1.NetworkPolicy{ObjectMeta: objMeta("out"), Spec: networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{}}}}
	Default(eg)
	if got := eg.Spec.PolicyTypes; len(got) != 2 || got[1] != networkingv1.PolicyTypeEgress {
		t.Errorf("policyTypes of a policy with egress rules: %v, want [Ingress Egress]", got)
	}
}

func TestValidateNetworkPolicy(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(np *networkingv1.NetworkPolicy)
		want   []wantErr
	}{
		{"valid", func(np *networkingv1.NetworkPolicy) {}, nil},
		{"protocol unknown", func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].Ports[0].Protocol = ptrTo(corev1.Protocol("ICMP"))
		},
			[]wantErr{{field.ErrorTypeNotSupported, "spec.ingress[0].ports[0].protocol", ""}}},
		{"endPort below port", func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].Ports[0].EndPort = ptrTo(int32(79)) },
			[]wantErr{{field.ErrorTypeInvalid, "spec.ingress[0].ports[0].endPort", "must be greater than or equal to `port`"}}},
		{"endPort with a named port", func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].Ports[1].EndPort = ptrTo(int32(90)) },
			[]wantErr{{field.ErrorTypeInvalid, "spec.ingress[0].ports[1].endPort", "may not be specified when `port` is non-numeric"}}},
		{"port 0", func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].Ports[0].Port = ptrTo(intstr.FromInt32(0)) },
			[]wantErr{{field.ErrorTypeInvalid, "spec.ingress[0].ports[0].port", ""}, {field.ErrorTypeInvalid, "spec.ingress[0].ports[0].port", ""}}},
		{"port name invalid", func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].Ports[1].Port = ptrTo(intstr.FromString("HTTP_1"))
		},
			[]wantErr{{field.ErrorTypeInvalid, "spec.ingress[0].ports[1].port", ""}}},
		{"empty peer", func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].From[0] = networkingv1.NetworkPolicyPeer{} },
			[]wantErr{{field.ErrorTypeRequired, "spec.ingress[0].from[0]", "must specify a peer"}}},
		{"ipBlock with a selector", func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].From[1].PodSelector = &metav1.LabelSelector{} },
			[]wantErr{{field.ErrorTypeForbidden, "spec.ingress[0].from[1]", "may not specify both ipBlock and another peer"}}},
		{"cidr invalid", func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].From[1].IPBlock.CIDR = "192.168.0.0/33" },
			[]wantErr{{field.ErrorTypeInvalid, "spec.ingress[0].from[1].ipBlock.cidr", ""}}},
		{"except outside the cidr", func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From[1].IPBlock.Except = []string{"10.0.0.0/8"}
		},
			[]wantErr{{field.ErrorTypeInvalid, "spec.ingress[0].from[1].ipBlock.except[0]", "must be a strict subset of `cidr`"}}},
		{"except the whole cidr", func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From[1].IPBlock.Except = []string{"192.168.0.0/16"}
		},
			[]wantErr{{field.ErrorTypeInvalid, "spec.ingress[0].from[1].ipBlock.except[0]", "must be a strict subset of `cidr`"}}},
		{"policy type unknown", func(np *networkingv1.NetworkPolicy) { np.Spec.PolicyTypes = []networkingv1.PolicyType{"Forward"} },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.policyTypes[0]", ""}}},
		{"three policy types", func(np *networkingv1.NetworkPolicy) {
			np.Spec.PolicyTypes = []networkingv1.PolicyType{"Ingress", "Egress", "Ingress"}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.policyTypes", "may not specify more than two policyTypes"}}},
		{"egress peer without a peer", func(np *networkingv1.NetworkPolicy) {
			np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{}}}}
		}, []wantErr{{field.ErrorTypeRequired, "spec.egress[0].to[0]", "must specify a peer"}}},
		{"pod selector invalid", func(np *networkingv1.NetworkPolicy) { np.Spec.PodSelector.MatchLabels["app"] = "-web" },
			[]wantErr{{field.ErrorTypeInvalid, "spec.podSelector.matchLabels", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			np := validNetworkPolicy()
			tt.mutate(np)
			checkErrs(t, ValidateCreate(np), tt.want...)
		})
	}
	t.Run("an update is validated as a create", func(t *testing.T) {
		old := validNetworkPolicy()
		old.Spec.Ingress[0].From[1].IPBlock.CIDR = "192.168.000.0/16" // leading zeros: taken, as by kube-apiserver
		old.ResourceVersion = "1"
		checkErrs(t, ValidateCreate(old))
		np := old.DeepCopy()
		np.Spec.Ingress[0].Ports = nil
		checkErrs(t, ValidateUpdate(np, old))
		np.Spec.Ingress[0].From[1].IPBlock.CIDR = "10.0.0.0/8"
		checkErrs(t, ValidateUpdate(np, old), wantErr{field.ErrorTypeInvalid, "spec.ingress[0].from[1].ipBlock.except[0]", "must be a strict subset of `cidr`"})
	})
}
