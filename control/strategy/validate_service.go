package strategy

import (
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validation of Services and Endpoints.

// The node port range; ports outside it are refused as Kubernetes' node
// port allocator refuses them.
const (
	NodePortMin = 30000
	NodePortMax = 32767
)

const maxClientIPServiceAffinitySeconds = 86400

var serviceTypes = []corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeExternalName, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort}

func isHeadless(s *corev1.Service) bool {
	return len(s.Spec.ClusterIPs) == 1 && s.Spec.ClusterIPs[0] == corev1.ClusterIPNone
}

func validateService(s *corev1.Service) field.ErrorList {
	errs := validateMeta(&s.ObjectMeta, true, nameIsDNS1035Label)
	sp := specPath
	headless := isHeadless(s)
	if len(s.Spec.Ports) == 0 && !headless && s.Spec.Type != corev1.ServiceTypeExternalName {
		errs = append(errs, field.Required(sp.Child("ports"), ""))
	}
	switch s.Spec.Type {
	case corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort:
		if headless {
			errs = append(errs, field.Invalid(sp.Child("clusterIPs").Index(0), s.Spec.ClusterIPs[0], fmt.Sprintf("may not be set to 'None' for %s services", s.Spec.Type)))
		}
	case corev1.ServiceTypeExternalName:
		if len(s.Spec.ClusterIPs) > 0 {
			errs = append(errs, field.Forbidden(sp.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
		if len(s.Spec.IPFamilies) > 0 {
			errs = append(errs, field.Forbidden(sp.Child("ipFamilies"), "may not be set for ExternalName services"))
		}
		if s.Spec.IPFamilyPolicy != nil {
			errs = append(errs, field.Forbidden(sp.Child("ipFamilyPolicy"), "may not be set for ExternalName services"))
		}
		if cname := strings.TrimSuffix(s.Spec.ExternalName, "."); cname != "" {
			errs = append(errs, validateDNS1123Subdomain(cname, sp.Child("externalName"))...)
		} else {
			errs = append(errs, field.Required(sp.Child("externalName"), ""))
		}
	}
	names := sets.New[string]()
	for i := range s.Spec.Ports {
		errs = append(errs, validateServicePort(&s.Spec.Ports[i], len(s.Spec.Ports) > 1, names, sp.Child("ports").Index(i))...)
	}
	if s.Spec.Selector != nil {
		errs = append(errs, metavalidation.ValidateLabels(s.Spec.Selector, sp.Child("selector"))...)
	}
	switch s.Spec.SessionAffinity {
	case "":
		errs = append(errs, field.Required(sp.Child("sessionAffinity"), ""))
	case corev1.ServiceAffinityClientIP:
		errs = append(errs, validateClientIPAffinity(s.Spec.SessionAffinityConfig, sp.Child("sessionAffinityConfig"))...)
	case corev1.ServiceAffinityNone:
		if s.Spec.SessionAffinityConfig != nil {
			errs = append(errs, field.Forbidden(sp.Child("sessionAffinityConfig"), fmt.Sprintf("must not be set when session affinity is %s", corev1.ServiceAffinityNone)))
		}
	default:
		errs = append(errs, field.NotSupported(sp.Child("sessionAffinity"), s.Spec.SessionAffinity,
			[]corev1.ServiceAffinity{corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone}))
	}
	errs = append(errs, validateClusterIPFields(s)...)
	for i, ip := range s.Spec.ExternalIPs {
		p := sp.Child("externalIPs").Index(i)
		if e := validation.IsValidIP(p, ip); len(e) != 0 {
			errs = append(errs, e...)
		} else {
			errs = append(errs, validateNonSpecialIP(ip, p)...)
		}
	}
	switch {
	case s.Spec.Type == "":
		errs = append(errs, field.Required(sp.Child("type"), ""))
	case !sets.New(serviceTypes...).Has(s.Spec.Type):
		errs = append(errs, field.NotSupported(sp.Child("type"), s.Spec.Type, serviceTypes))
	}
	errs = append(errs, validateServiceNodePorts(s)...)
	ports := map[corev1.ServicePort]bool{}
	for i, p := range s.Spec.Ports {
		key := corev1.ServicePort{Protocol: p.Protocol, Port: p.Port}
		if ports[key] {
			errs = append(errs, field.Duplicate(sp.Child("ports").Index(i), key))
		}
		ports[key] = true
	}
	if len(s.Spec.LoadBalancerSourceRanges) > 0 {
		p := sp.Child("LoadBalancerSourceRanges")
		if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
			errs = append(errs, field.Forbidden(p, "may only be used when `type` is 'LoadBalancer'"))
		}
		for i, r := range s.Spec.LoadBalancerSourceRanges {
			errs = append(errs, validation.IsValidCIDR(p.Index(i), strings.TrimSpace(r))...)
		}
	}
	if s.Spec.AllocateLoadBalancerNodePorts != nil && s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		errs = append(errs, field.Forbidden(sp.Child("allocateLoadBalancerNodePorts"), "may only be used when `type` is 'LoadBalancer'"))
	}
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.AllocateLoadBalancerNodePorts == nil {
		// Kubernetes reports this one without the spec prefix.
		errs = append(errs, field.Required(field.NewPath("allocateLoadBalancerNodePorts"), ""))
	}
	if s.Spec.LoadBalancerClass != nil {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			errs = append(errs, validateQualifiedName(*s.Spec.LoadBalancerClass, sp.Child("loadBalancerClass"))...)
		} else {
			errs = append(errs, field.Forbidden(sp.Child("loadBalancerClass"), "may only be used when `type` is 'LoadBalancer'"))
		}
	}
	errs = append(errs, validateTrafficPolicies(s)...)
	return errs
}

func validateServicePort(p *corev1.ServicePort, requireName bool, names sets.Set[string], fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if requireName && p.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	} else if p.Name != "" {
		errs = append(errs, validateDNS1123Label(p.Name, fldPath.Child("name"))...)
		if names.Has(p.Name) {
			errs = append(errs, field.Duplicate(fldPath.Child("name"), p.Name))
		} else {
			names.Insert(p.Name)
		}
	}
	for _, msg := range validation.IsValidPortNum(int(p.Port)) {
		errs = append(errs, field.Invalid(fldPath.Child("port"), p.Port, msg))
	}
	errs = append(errs, validateProtocol(p.Protocol, fldPath.Child("protocol"))...)
	errs = append(errs, validatePortNumOrName(p.TargetPort, fldPath.Child("targetPort"))...)
	if p.AppProtocol != nil {
		errs = append(errs, validateQualifiedName(*p.AppProtocol, fldPath.Child("appProtocol"))...)
	}
	return errs
}

// validateServiceNodePorts: no node ports on ClusterIP services, given ones
// in the node port range and not repeated per protocol.
func validateServiceNodePorts(s *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	seen := map[corev1.ServicePort]bool{}
	for i, p := range s.Spec.Ports {
		pp := specPath.Child("ports").Index(i).Child("nodePort")
		if p.NodePort == 0 {
			continue
		}
		if s.Spec.Type == corev1.ServiceTypeClusterIP {
			errs = append(errs, field.Forbidden(pp, "may not be used when `type` is 'ClusterIP'"))
		} else if p.NodePort < NodePortMin || p.NodePort > NodePortMax {
			errs = append(errs, field.Invalid(pp, p.NodePort,
				fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %d-%d", NodePortMin, NodePortMax)))
		}
		key := corev1.ServicePort{Protocol: p.Protocol, NodePort: p.NodePort}
		if seen[key] {
			errs = append(errs, field.Duplicate(pp, p.NodePort))
		}
		seen[key] = true
	}
	return errs
}

func validateClientIPAffinity(c *corev1.SessionAffinityConfig, fldPath *field.Path) field.ErrorList {
	msg := fmt.Sprintf("when session affinity type is %s", corev1.ServiceAffinityClientIP)
	switch {
	case c == nil:
		return field.ErrorList{field.Required(fldPath, msg)}
	case c.ClientIP == nil:
		return field.ErrorList{field.Required(fldPath.Child("clientIP"), msg)}
	case c.ClientIP.TimeoutSeconds == nil:
		return field.ErrorList{field.Required(fldPath.Child("clientIP", "timeoutSeconds"), msg)}
	}
	if t := *c.ClientIP.TimeoutSeconds; t <= 0 || t > maxClientIPServiceAffinitySeconds {
		return field.ErrorList{field.Invalid(fldPath.Child("clientIP", "timeoutSeconds"), t,
			fmt.Sprintf("must be greater than 0 and less than %d", maxClientIPServiceAffinitySeconds))}
	}
	return nil
}

func validateTrafficPolicies(s *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	sp := specPath
	if !externallyAccessible(s) {
		if s.Spec.ExternalTrafficPolicy != "" {
			errs = append(errs, field.Invalid(sp.Child("externalTrafficPolicy"), s.Spec.ExternalTrafficPolicy, "may only be set for externally-accessible services"))
		}
	} else {
		switch s.Spec.ExternalTrafficPolicy {
		case corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal:
		case "":
			errs = append(errs, field.Required(sp.Child("externalTrafficPolicy"), ""))
		default:
			errs = append(errs, field.NotSupported(sp.Child("externalTrafficPolicy"), s.Spec.ExternalTrafficPolicy,
				[]corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal}))
		}
	}
	// The health check node port is allocated by the registry, so only a
	// given one is checked here.
	if hc := s.Spec.HealthCheckNodePort; hc != 0 {
		if !needsHealthCheck(s) {
			errs = append(errs, field.Invalid(sp.Child("healthCheckNodePort"), hc, "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
		} else {
			for _, msg := range validation.IsValidPortNum(int(hc)) {
				errs = append(errs, field.Invalid(sp.Child("healthCheckNodePort"), hc, msg))
			}
		}
	}
	itp := s.Spec.InternalTrafficPolicy
	if itp == nil {
		if t := s.Spec.Type; t == corev1.ServiceTypeNodePort || t == corev1.ServiceTypeLoadBalancer || t == corev1.ServiceTypeClusterIP {
			errs = append(errs, field.Required(sp.Child("internalTrafficPolicy"), ""))
		}
	} else if *itp != corev1.ServiceInternalTrafficPolicyCluster && *itp != corev1.ServiceInternalTrafficPolicyLocal {
		errs = append(errs, field.NotSupported(sp.Child("internalTrafficPolicy"), *itp,
			[]corev1.ServiceInternalTrafficPolicy{corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal}))
	}
	if td := s.Spec.TrafficDistribution; td != nil && *td != corev1.ServiceTrafficDistributionPreferClose &&
		*td != corev1.ServiceTrafficDistributionPreferSameZone && *td != corev1.ServiceTrafficDistributionPreferSameNode {
		errs = append(errs, field.NotSupported(sp.Child("trafficDistribution"), *td, []string{corev1.ServiceTrafficDistributionPreferClose,
			corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferSameNode}))
	}
	return errs
}

// validateClusterIPFields checks clusterIP, clusterIPs, ipFamilies and
// ipFamilyPolicy together.
func validateClusterIPFields(s *corev1.Service) field.ErrorList {
	if s.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	var errs field.ErrorList
	ipsPath, famPath := specPath.Child("clusterIPs"), specPath.Child("ipFamilies")
	ips := s.Spec.ClusterIPs
	if s.Spec.ClusterIP != "" {
		if len(ips) == 0 {
			errs = append(errs, field.Required(ipsPath, ""))
		} else if ips[0] != s.Spec.ClusterIP {
			errs = append(errs, field.Invalid(ipsPath, ips, "first value must match `clusterIP`"))
		}
	} else if len(ips) != 0 {
		errs = append(errs, field.Invalid(ipsPath, ips, "must be empty when `clusterIP` is not specified"))
	}
	seen := sets.New[corev1.IPFamily]()
	for i, f := range s.Spec.IPFamilies {
		if f != corev1.IPv4Protocol && f != corev1.IPv6Protocol {
			errs = append(errs, field.NotSupported(famPath.Index(i), f, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}))
		}
		if seen.Has(f) {
			errs = append(errs, field.Duplicate(famPath.Index(i), f))
		}
		seen.Insert(f)
	}
	if p := s.Spec.IPFamilyPolicy; p != nil && *p != corev1.IPFamilyPolicySingleStack && *p != corev1.IPFamilyPolicyPreferDualStack && *p != corev1.IPFamilyPolicyRequireDualStack {
		errs = append(errs, field.NotSupported(specPath.Child("ipFamilyPolicy"), p, []corev1.IPFamilyPolicy{corev1.IPFamilyPolicyPreferDualStack,
			corev1.IPFamilyPolicyRequireDualStack, corev1.IPFamilyPolicySingleStack}))
	}
	bad := false
	for i, ip := range ips {
		if i == 0 && ip == corev1.ClusterIPNone {
			if len(ips) > 1 {
				bad = true
				errs = append(errs, field.Invalid(ipsPath, ips, "'None' must be the first and only value"))
			}
			continue
		}
		e := validation.IsValidIP(ipsPath.Index(i), ip)
		bad = bad || len(e) > 0
		errs = append(errs, e...)
	}
	if len(ips) > 2 {
		errs = append(errs, field.Invalid(ipsPath, ips, "may only hold up to 2 values"))
	}
	if bad {
		return errs
	}
	if len(ips) > 1 {
		f0, _ := familyOf(ips[0])
		f1, _ := familyOf(ips[1])
		if f0 == f1 {
			errs = append(errs, field.Invalid(ipsPath, ips, "may specify no more than one IP for each IP family"))
		}
	}
	if !isHeadless(s) {
		for i, ip := range ips {
			if i >= len(s.Spec.IPFamilies) {
				break
			}
			fam, _ := familyOf(ip)
			if want := s.Spec.IPFamilies[i]; want != fam && (want == corev1.IPv4Protocol || want == corev1.IPv6Protocol) {
				errs = append(errs, field.Invalid(ipsPath.Index(i), ip, fmt.Sprintf("expected an %s value as indicated by `ipFamilies[%v]`", want, i)))
			}
		}
	}
	return errs
}

// validateNonSpecialIP refuses unspecified, loopback and link-local
// addresses.
func validateNonSpecialIP(addr string, fldPath *field.Path) field.ErrorList {
	ip := net.ParseIP(addr)
	if ip == nil {
		return field.ErrorList{field.Invalid(fldPath, addr, "must be a valid IP address")}
	}
	var errs field.ErrorList
	if ip.IsUnspecified() {
		errs = append(errs, field.Invalid(fldPath, addr, fmt.Sprintf("may not be unspecified (%v)", addr)))
	}
	if ip.IsLoopback() {
		errs = append(errs, field.Invalid(fldPath, addr, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	}
	if ip.IsLinkLocalUnicast() {
		errs = append(errs, field.Invalid(fldPath, addr, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	}
	if ip.IsLinkLocalMulticast() {
		errs = append(errs, field.Invalid(fldPath, addr, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return errs
}

// validateServiceUpdate: the primary cluster IP and IP family may not
// change (except to, from or on ExternalName services), nor the load
// balancer class or a needed health check node port.
func validateServiceUpdate(s, old *corev1.Service) field.ErrorList {
	errs := validateMetaUpdate(&s.ObjectMeta, &old.ObjectMeta)
	if s.Spec.Type != corev1.ServiceTypeExternalName && old.Spec.Type != corev1.ServiceTypeExternalName {
		errs = append(errs, validateClusterIPsUpdate(s, old)...)
		errs = append(errs, validateIPFamiliesUpdate(s, old)...)
	}
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer && old.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		deref(s.Spec.LoadBalancerClass, "\x00") != deref(old.Spec.LoadBalancerClass, "\x00") {
		errs = append(errs, field.Invalid(specPath.Child("loadBalancerClass"), s.Spec.LoadBalancerClass, "may not change once set"))
	}
	if needsHealthCheck(old) && needsHealthCheck(s) && s.Spec.HealthCheckNodePort != old.Spec.HealthCheckNodePort {
		errs = append(errs, field.Forbidden(specPath.Child("healthCheckNodePort"), "field is immutable"))
	}
	return append(errs, validateService(s)...)
}

func validateClusterIPsUpdate(s, old *corev1.Service) field.ErrorList {
	if isHeadless(s) && isHeadless(old) {
		return nil
	}
	p := specPath.Child("clusterIPs")
	ips, oips := s.Spec.ClusterIPs, old.Spec.ClusterIPs
	var errs field.ErrorList
	switch {
	case len(oips) == len(ips):
		for i, ip := range oips {
			if ip != ips[i] {
				errs = append(errs, field.Invalid(p.Index(i), ips, "may not change once set"))
			}
		}
	case len(oips) > len(ips):
		if len(ips) == 0 {
			errs = append(errs, field.Invalid(p.Index(0), ips, "primary clusterIP can not be unset"))
		} else if len(oips) > 0 && ips[0] != oips[0] {
			errs = append(errs, field.Invalid(p.Index(0), ips, "may not change once set"))
		}
		if len(ips) == 1 && deref(s.Spec.IPFamilyPolicy, "") != corev1.IPFamilyPolicySingleStack {
			errs = append(errs, field.Invalid(specPath.Child("ipFamilyPolicy"), s.Spec.IPFamilyPolicy, "must be set to 'SingleStack' when releasing the secondary clusterIP"))
		}
	default:
		if len(oips) > 0 && ips[0] != oips[0] {
			errs = append(errs, field.Invalid(p.Index(0), ips, "may not change once set"))
		}
	}
	return errs
}

func validateIPFamiliesUpdate(s, old *corev1.Service) field.ErrorList {
	if isHeadless(s) || isHeadless(old) {
		return nil
	}
	p := specPath.Child("ipFamilies")
	fams, ofams := s.Spec.IPFamilies, old.Spec.IPFamilies
	var errs field.ErrorList
	switch {
	case len(ofams) == len(fams):
		for i, f := range ofams {
			if f != fams[i] {
				errs = append(errs, field.Invalid(p.Index(0), fams, "may not change once set"))
			}
		}
	case len(ofams) > len(fams):
		if len(s.Spec.ClusterIPs) == 0 {
			errs = append(errs, field.Invalid(p.Index(0), fams, "primary ipFamily can not be unset"))
		}
		if len(fams) > 0 && fams[0] != ofams[0] {
			errs = append(errs, field.Invalid(p.Index(0), s.Spec.ClusterIPs, "may not change once set"))
		}
		if len(fams) == 1 && deref(s.Spec.IPFamilyPolicy, "") != corev1.IPFamilyPolicySingleStack {
			errs = append(errs, field.Invalid(specPath.Child("ipFamilyPolicy"), s.Spec.IPFamilyPolicy, "must be set to 'SingleStack' when releasing the secondary ipFamily"))
		}
	default:
		if len(ofams) > 0 && len(fams) > 0 && fams[0] != ofams[0] {
			errs = append(errs, field.Invalid(p.Index(0), s.Spec.ClusterIPs, "may not change once set"))
		}
	}
	return errs
}

func validateServiceStatus(s, old *corev1.Service) field.ErrorList {
	errs := validateMetaUpdate(&s.ObjectMeta, &old.ObjectMeta)
	p := field.NewPath("status", "loadBalancer", "ingress")
	for i, ing := range s.Status.LoadBalancer.Ingress {
		ip := p.Index(i)
		if ing.IP != "" {
			errs = append(errs, validation.IsValidIP(ip.Child("ip"), ing.IP)...)
		}
		if ing.IPMode != nil && ing.IP == "" {
			errs = append(errs, field.Forbidden(ip.Child("ipMode"), "may not be specified when `ip` is not set"))
		} else if ing.IPMode != nil && *ing.IPMode != corev1.LoadBalancerIPModeVIP && *ing.IPMode != corev1.LoadBalancerIPModeProxy {
			errs = append(errs, field.NotSupported(ip.Child("ipMode"), ing.IPMode,
				[]corev1.LoadBalancerIPMode{corev1.LoadBalancerIPModeProxy, corev1.LoadBalancerIPModeVIP}))
		}
		if ing.Hostname != "" {
			errs = append(errs, validateDNS1123Subdomain(ing.Hostname, ip.Child("hostname"))...)
			if net.ParseIP(ing.Hostname) != nil {
				errs = append(errs, field.Invalid(ip.Child("hostname"), ing.Hostname, "must be a DNS name, not an IP address"))
			}
		}
	}
	return errs
}

func validateEndpoints(e *corev1.Endpoints) field.ErrorList {
	errs := validateMeta(&e.ObjectMeta, true, nameIsDNSSubdomain)
	p := field.NewPath("subsets")
	for i, ss := range e.Subsets {
		idx := p.Index(i)
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			errs = append(errs, field.Required(idx, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j, a := range ss.Addresses {
			errs = append(errs, validateEndpointAddress(&a, idx.Child("addresses").Index(j))...)
		}
		for j, a := range ss.NotReadyAddresses {
			errs = append(errs, validateEndpointAddress(&a, idx.Child("notReadyAddresses").Index(j))...)
		}
		for j, port := range ss.Ports {
			pp := idx.Child("ports").Index(j)
			if len(ss.Ports) > 1 && port.Name == "" {
				errs = append(errs, field.Required(pp.Child("name"), ""))
			} else if port.Name != "" {
				errs = append(errs, validateDNS1123Label(port.Name, pp.Child("name"))...)
			}
			for _, msg := range validation.IsValidPortNum(int(port.Port)) {
				errs = append(errs, field.Invalid(pp.Child("port"), port.Port, msg))
			}
			errs = append(errs, validateProtocol(port.Protocol, pp.Child("protocol"))...)
			if port.AppProtocol != nil {
				errs = append(errs, validateQualifiedName(*port.AppProtocol, pp.Child("appProtocol"))...)
			}
		}
	}
	return errs
}

func validateEndpointAddress(a *corev1.EndpointAddress, fldPath *field.Path) field.ErrorList {
	errs := validation.IsValidIP(fldPath.Child("ip"), a.IP)
	if len(errs) == 0 {
		errs = validateNonSpecialIP(a.IP, fldPath.Child("ip"))
	}
	if a.Hostname != "" {
		errs = append(errs, validateDNS1123Label(a.Hostname, fldPath.Child("hostname"))...)
	}
	if a.NodeName != nil {
		errs = append(errs, validateName(*a.NodeName, nameIsDNSSubdomain, fldPath.Child("nodeName"))...)
	}
	return errs
}

func validateEndpointsUpdate(e, old *corev1.Endpoints) field.ErrorList {
	return append(validateMetaUpdate(&e.ObjectMeta, &old.ObjectMeta), validateEndpoints(e)...)
}
