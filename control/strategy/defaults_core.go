package strategy

import (
	"net"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Defaults of core/v1 types other than Pods (pkg/apis/core/v1/defaults.go,
// plus the Service IP family fields that Kubernetes' service registry sets).

// DefaultServiceIPFamily is the IP family given to Services that name none
// and whose cluster IP does not tell.
var DefaultServiceIPFamily = corev1.IPv4Protocol

func defaultService(s *corev1.Service) {
	sp := &s.Spec
	if sp.SessionAffinity == "" {
		sp.SessionAffinity = corev1.ServiceAffinityNone
	}
	if sp.SessionAffinity == corev1.ServiceAffinityNone {
		sp.SessionAffinityConfig = nil
	}
	if sp.SessionAffinity == corev1.ServiceAffinityClientIP {
		c := sp.SessionAffinityConfig
		if c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			sp.SessionAffinityConfig = &corev1.SessionAffinityConfig{
				ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptrTo(corev1.DefaultClientIPServiceAffinitySeconds)},
			}
		}
	}
	if sp.Type == "" {
		sp.Type = corev1.ServiceTypeClusterIP
	}
	for i := range sp.Ports {
		p := &sp.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if externallyAccessible(s) && sp.ExternalTrafficPolicy == "" {
		sp.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if sp.InternalTrafficPolicy == nil && (sp.Type == corev1.ServiceTypeNodePort || sp.Type == corev1.ServiceTypeLoadBalancer || sp.Type == corev1.ServiceTypeClusterIP) {
		sp.InternalTrafficPolicy = ptrTo(corev1.ServiceInternalTrafficPolicyCluster)
	}
	if sp.Type == corev1.ServiceTypeLoadBalancer {
		if sp.AllocateLoadBalancerNodePorts == nil {
			sp.AllocateLoadBalancerNodePorts = ptrTo(true)
		}
		for i, ing := range s.Status.LoadBalancer.Ingress {
			if ing.IP != "" && ing.IPMode == nil {
				s.Status.LoadBalancer.Ingress[i].IPMode = ptrTo(corev1.LoadBalancerIPModeVIP)
			}
		}
	}
	defaultServiceIPFields(s)
}

// defaultServiceIPFields keeps clusterIP and clusterIPs in step and fills
// ipFamilyPolicy and ipFamilies as Kubernetes' service registry does on a
// single-stack cluster. Allocating the addresses is not done here.
func defaultServiceIPFields(s *corev1.Service) {
	sp := &s.Spec
	if sp.Type == corev1.ServiceTypeExternalName {
		return
	}
	if sp.ClusterIP != "" && len(sp.ClusterIPs) == 0 {
		sp.ClusterIPs = []string{sp.ClusterIP}
	} else if sp.ClusterIP == "" && len(sp.ClusterIPs) > 0 {
		sp.ClusterIP = sp.ClusterIPs[0]
	}
	headlessNoSelector := sp.ClusterIP == corev1.ClusterIPNone && len(sp.Selector) == 0
	if sp.IPFamilyPolicy == nil {
		if headlessNoSelector {
			sp.IPFamilyPolicy = ptrTo(corev1.IPFamilyPolicyRequireDualStack)
		} else {
			sp.IPFamilyPolicy = ptrTo(corev1.IPFamilyPolicySingleStack)
		}
	}
	for i := len(sp.IPFamilies); i < len(sp.ClusterIPs); i++ {
		fam, ok := familyOf(sp.ClusterIPs[i])
		if !ok {
			break
		}
		sp.IPFamilies = append(sp.IPFamilies, fam)
	}
	if len(sp.IPFamilies) == 0 {
		sp.IPFamilies = []corev1.IPFamily{DefaultServiceIPFamily}
	}
	if headlessNoSelector && len(sp.IPFamilies) == 1 && *sp.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
		sp.IPFamilies = append(sp.IPFamilies, otherFamily(sp.IPFamilies[0]))
	}
}

// familyOf is the family of a cluster IP; "None" and garbage have none.
func familyOf(ip string) (corev1.IPFamily, bool) {
	parsed := net.ParseIP(ip)
	switch {
	case parsed == nil:
		return "", false
	case parsed.To4() != nil:
		return corev1.IPv4Protocol, true
	default:
		return corev1.IPv6Protocol, true
	}
}

func otherFamily(f corev1.IPFamily) corev1.IPFamily {
	if f == corev1.IPv4Protocol {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// externallyAccessible reports whether a Service takes traffic from
// outside the cluster (Kubernetes' apiservice.ExternallyAccessible).
func externallyAccessible(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeLoadBalancer || s.Spec.Type == corev1.ServiceTypeNodePort ||
		(s.Spec.Type == corev1.ServiceTypeClusterIP && len(s.Spec.ExternalIPs) > 0)
}

// needsHealthCheck reports whether a Service needs a health check node port.
func needsHealthCheck(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

func defaultNamespace(n *corev1.Namespace) {
	if n.Name != "" {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[corev1.LabelMetadataName] = n.Name
	}
	if n.Status.Phase == "" {
		n.Status.Phase = corev1.NamespaceActive
	}
}

// defaultSecret sets the type and, as the v1 conversion does, merges the
// write-only stringData into data.
func defaultSecret(s *corev1.Secret) {
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = make(map[string][]byte, len(s.StringData))
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
	}
	s.StringData = nil
}

func defaultConfigMap(c *corev1.ConfigMap) {
	if c.Data == nil {
		c.Data = make(map[string]string)
	}
}

func defaultPersistentVolume(pv *corev1.PersistentVolume) {
	if pv.Status.Phase == "" {
		pv.Status.Phase = corev1.VolumePending
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if pv.Spec.VolumeMode == nil {
		pv.Spec.VolumeMode = ptrTo(corev1.PersistentVolumeFilesystem)
	}
	roundResources(pv.Spec.Capacity)
	src := &pv.Spec.PersistentVolumeSource
	if src.HostPath != nil && src.HostPath.Type == nil {
		src.HostPath.Type = ptrTo(corev1.HostPathUnset)
	}
	if i := src.ISCSI; i != nil && i.ISCSIInterface == "" {
		i.ISCSIInterface = "default"
	}
	if r := src.RBD; r != nil {
		defaultRBD(&r.RBDPool, &r.RadosUser, &r.Keyring)
	}
	if a := src.AzureDisk; a != nil {
		defaultAzureDisk(a)
	}
	if s := src.ScaleIO; s != nil {
		defaultScaleIO(&s.StorageMode, &s.FSType)
	}
}

func defaultPersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) {
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
	defaultPersistentVolumeClaimSpec(&pvc.Spec)
	roundResources(pvc.Status.Capacity)
	roundResources(pvc.Status.AllocatedResources)
}

func defaultPersistentVolumeClaimSpec(s *corev1.PersistentVolumeClaimSpec) {
	if s.VolumeMode == nil {
		s.VolumeMode = ptrTo(corev1.PersistentVolumeFilesystem)
	}
	roundResources(s.Resources.Limits)
	roundResources(s.Resources.Requests)
}

// defaultNode gives a Node without allocatable its capacity.
func defaultNode(n *corev1.Node) {
	if n.Status.Allocatable == nil && n.Status.Capacity != nil {
		n.Status.Allocatable = make(corev1.ResourceList, len(n.Status.Capacity))
		for k, v := range n.Status.Capacity {
			n.Status.Allocatable[k] = v.DeepCopy()
		}
	}
	roundResources(n.Status.Capacity)
	roundResources(n.Status.Allocatable)
}

func defaultEndpoints(e *corev1.Endpoints) {
	for i := range e.Subsets {
		for j := range e.Subsets[i].Ports {
			if e.Subsets[i].Ports[j].Protocol == "" {
				e.Subsets[i].Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}
