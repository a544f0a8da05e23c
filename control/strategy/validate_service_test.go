package strategy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateService(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(s *corev1.Service)
		want   []wantErr
	}{
		{"valid", func(s *corev1.Service) {}, nil},
		{"name not a DNS-1035 label", func(s *corev1.Service) { s.Name = "1web" },
			[]wantErr{{field.ErrorTypeInvalid, "metadata.name", "a DNS-1035 label must consist of"}}},
		{"name with dots", func(s *corev1.Service) { s.Name = "web.v1" },
			[]wantErr{{field.ErrorTypeInvalid, "metadata.name", ""}}},
		{"ports required", func(s *corev1.Service) { s.Spec.Ports = nil },
			[]wantErr{{field.ErrorTypeRequired, "spec.ports", ""}}},
		{"headless without ports", func(s *corev1.Service) {
			s.Spec.Ports = nil
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"}
		}, nil},
		{"external name without ports", func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com", SessionAffinity: "None"}
		}, nil},
		{"external name invalid", func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db_example", SessionAffinity: "None"}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.externalName", ""}}},
		{"port names required when several", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "b", Port: 81, Protocol: "TCP", TargetPort: intstr.FromInt32(81)})
		}, []wantErr{{field.ErrorTypeRequired, "spec.ports[0].name", ""}}},
		{"port names repeat", func(s *corev1.Service) {
			s.Spec.Ports[0].Name = "http"
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "http", Port: 81, Protocol: "TCP", TargetPort: intstr.FromInt32(81)})
		}, []wantErr{{field.ErrorTypeDuplicate, "spec.ports[1].name", ""}}},
		{"port zero", func(s *corev1.Service) { s.Spec.Ports[0].Port = 0 },
			[]wantErr{{field.ErrorTypeInvalid, "spec.ports[0].port", "must be between 1 and 65535, inclusive"}}},
		{"target port out of range", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(70000) },
			[]wantErr{{field.ErrorTypeInvalid, "spec.ports[0].targetPort", "must be between 1 and 65535"}}},
		{"target port name invalid", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("http_alt") },
			[]wantErr{{field.ErrorTypeInvalid, "spec.ports[0].targetPort", ""}}},
		{"protocol unknown", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "HTTP" },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.ports[0].protocol", ""}}},
		{"duplicate port and protocol", func(s *corev1.Service) {
			s.Spec.Ports[0].Name = "a"
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "b", Port: 80, Protocol: "TCP", TargetPort: intstr.FromInt32(81)})
		}, []wantErr{{field.ErrorTypeDuplicate, "spec.ports[1]", ""}}},
		{"type unknown", func(s *corev1.Service) { s.Spec.Type = "Public" },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.type", `"ClusterIP", "ExternalName", "LoadBalancer", "NodePort"`}}},
		{"node port on cluster IP service", func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30080 },
			[]wantErr{{field.ErrorTypeForbidden, "spec.ports[0].nodePort", "may not be used when `type` is 'ClusterIP'"}}},
		{"node port out of range", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
			s.Spec.Ports[0].NodePort = 8080
		}, []wantErr{{field.ErrorTypeInvalid, "spec.ports[0].nodePort", "provided port is not in the valid range. The range of valid ports is 30000-32767"}}},
		{"node port in range", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
			s.Spec.Ports[0].NodePort = 30080
		}, nil},
		{"selector label invalid", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "a b"} },
			[]wantErr{{field.ErrorTypeInvalid, "spec.selector", ""}}},
		{"session affinity unknown", func(s *corev1.Service) { s.Spec.SessionAffinity = "Cookie" },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.sessionAffinity", ""}}},
		{"external traffic policy on cluster IP", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal },
			[]wantErr{{field.ErrorTypeInvalid, "spec.externalTrafficPolicy", "may only be set for externally-accessible services"}}},
		{"cluster IP invalid", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.0.0.999", []string{"10.0.0.999"} },
			[]wantErr{{field.ErrorTypeInvalid, "spec.clusterIPs[0]", ""}}},
		{"cluster IPs disagree", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.0.0.10", []string{"10.0.0.11"} },
			[]wantErr{{field.ErrorTypeInvalid, "spec.clusterIPs", "first value must match `clusterIP`"}}},
		{"load balancer source ranges on cluster IP", func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} },
			[]wantErr{{field.ErrorTypeForbidden, "spec.LoadBalancerSourceRanges", ""}}},
		{"external IP loopback", func(s *corev1.Service) {
			s.Spec.ExternalIPs = []string{"127.0.0.1"}
			s.Spec.ExternalTrafficPolicy = "Cluster"
		},
			[]wantErr{{field.ErrorTypeInvalid, "spec.externalIPs[0]", "may not be in the loopback range"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validService()
			tt.mutate(s)
			checkErrs(t, ValidateCreate(s), tt.want...)
		})
	}
}

func TestValidateServiceUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(s *corev1.Service)
		want   []wantErr
	}{
		{"ports may change", func(s *corev1.Service) { s.Spec.Ports[0].Port = 8080 }, nil},
		{"selector may change", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "web2"} }, nil},
		{"cluster IP is immutable", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.20", []string{"10.96.0.20"} },
			[]wantErr{{field.ErrorTypeInvalid, "spec.clusterIPs[0]", "may not change once set"}}},
		{"cluster IP may not be unset", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil },
			[]wantErr{{field.ErrorTypeInvalid, "spec.clusterIPs[0]", "primary clusterIP can not be unset"}}},
		{"ip family is immutable", func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} },
			[]wantErr{{field.ErrorTypeInvalid, "spec.ipFamilies[0]", "may not change once set"}}},
		{"may become external name", func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "x.example.com", SessionAffinity: "None"}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := validService()
			old.Spec.ClusterIP, old.Spec.ClusterIPs = "10.96.0.10", []string{"10.96.0.10"}
			s := old.DeepCopy()
			tt.mutate(s)
			checkErrs(t, ValidateUpdate(s, old), tt.want...)
		})
	}
}

func TestValidateServiceStatus(t *testing.T) {
	old := validService()
	s := old.DeepCopy()
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.168.1.300"}}
	checkErrs(t, ValidateStatusUpdate(s, old), wantErr{field.ErrorTypeInvalid, "status.loadBalancer.ingress[0].ip", ""})
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.168.1.30", IPMode: ptrTo(corev1.LoadBalancerIPModeVIP)}}
	checkErrs(t, ValidateStatusUpdate(s, old))
}

func TestValidateEndpoints(t *testing.T) {
	e := &corev1.Endpoints{ObjectMeta: objMeta("web"), Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.1.0.5"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}}
	Default(e)
	checkErrs(t, ValidateCreate(e))
	e.Subsets[0].Addresses[0].IP = "127.0.0.1"
	checkErrs(t, ValidateCreate(e), wantErr{field.ErrorTypeInvalid, "subsets[0].addresses[0].ip", "loopback"})
}
