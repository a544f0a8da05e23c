package strategy

import (
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// Validation of Ingresses, IngressClasses and EndpointSlices.

const (
	ingressClassAnnotation       = "kubernetes.io/ingress.class"
	maxLenIngressClassController = 250
)

var (
	invalidPathSequences = []string{"//", "/./", "/../", "%2f", "%2F"}
	invalidPathSuffixes  = []string{"/..", "/."}
	supportedPathTypes   = []string{string(networkingv1.PathTypeExact), string(networkingv1.PathTypeImplementationSpecific), string(networkingv1.PathTypePrefix)}
)

func validateIngress(ing *networkingv1.Ingress) field.ErrorList {
	errs := validateMeta(&ing.ObjectMeta, true, nameIsDNSSubdomain)
	errs = append(errs, validateIngressSpec(&ing.Spec, specPath)...)
	if v, ok := ing.Annotations[ingressClassAnnotation]; ok && ing.Spec.IngressClassName != nil && v != *ing.Spec.IngressClassName {
		errs = append(errs, field.Invalid(field.NewPath("annotations").Child(ingressClassAnnotation), v, "must match `ingressClassName` when both are specified"))
	}
	return errs
}

func validateIngressUpdate(ing, old *networkingv1.Ingress) field.ErrorList {
	errs := validateMetaUpdate(&ing.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateMeta(&ing.ObjectMeta, true, nameIsDNSSubdomain)...)
	return append(errs, validateIngressSpec(&ing.Spec, specPath)...)
}

func validateIngressSpec(s *networkingv1.IngressSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(s.Rules) == 0 && s.DefaultBackend == nil {
		errs = append(errs, field.Invalid(fldPath, s.Rules, "either `defaultBackend` or `rules` must be specified"))
	}
	if s.DefaultBackend != nil {
		errs = append(errs, validateIngressBackend(s.DefaultBackend, fldPath.Child("defaultBackend"))...)
	}
	for i, r := range s.Rules {
		rp := fldPath.Child("rules").Index(i)
		if r.Host != "" {
			if net.ParseIP(r.Host) != nil {
				errs = append(errs, field.Invalid(rp.Child("host"), r.Host, "must be a DNS name, not an IP address"))
			}
			var msgs []string
			if strings.Contains(r.Host, "*") {
				msgs = validation.IsWildcardDNS1123Subdomain(r.Host)
			} else {
				msgs = validation.IsDNS1123Subdomain(r.Host)
			}
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(rp.Child("host"), r.Host, msg))
			}
		}
		if r.HTTP != nil {
			hp := rp.Child("http")
			if len(r.HTTP.Paths) == 0 {
				errs = append(errs, field.Required(hp.Child("paths"), ""))
			}
			for j := range r.HTTP.Paths {
				errs = append(errs, validateHTTPIngressPath(&r.HTTP.Paths[j], hp.Child("paths").Index(j))...)
			}
		}
	}
	for i, t := range s.TLS {
		tp := fldPath.Child("tls").Index(i)
		for j, h := range t.Hosts {
			var msgs []string
			if strings.Contains(h, "*") {
				msgs = validation.IsWildcardDNS1123Subdomain(h)
			} else {
				msgs = validation.IsDNS1123Subdomain(h)
			}
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(tp.Child("hosts").Index(j), h, msg))
			}
		}
		if t.SecretName != "" {
			errs = append(errs, validateName(t.SecretName, nameIsDNSSubdomain, tp.Child("secretName"))...)
		}
	}
	if s.IngressClassName != nil {
		errs = append(errs, validateName(*s.IngressClassName, nameIsDNSSubdomain, fldPath.Child("ingressClassName"))...)
	}
	return errs
}

func validateHTTPIngressPath(p *networkingv1.HTTPIngressPath, fldPath *field.Path) field.ErrorList {
	if p.PathType == nil {
		return field.ErrorList{field.Required(fldPath.Child("pathType"), "pathType must be specified")}
	}
	var errs field.ErrorList
	pp := fldPath.Child("path")
	switch *p.PathType {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
		if !strings.HasPrefix(p.Path, "/") {
			errs = append(errs, field.Invalid(pp, p.Path, "must be an absolute path"))
		}
		for _, seq := range invalidPathSequences {
			if strings.Contains(p.Path, seq) {
				errs = append(errs, field.Invalid(pp, p.Path, fmt.Sprintf("must not contain '%s'", seq)))
			}
		}
		for _, suf := range invalidPathSuffixes {
			if strings.HasSuffix(p.Path, suf) {
				errs = append(errs, field.Invalid(pp, p.Path, fmt.Sprintf("cannot end with '%s'", suf)))
			}
		}
	case networkingv1.PathTypeImplementationSpecific:
		if p.Path != "" && !strings.HasPrefix(p.Path, "/") {
			errs = append(errs, field.Invalid(pp, p.Path, "must be an absolute path"))
		}
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("pathType"), *p.PathType, supportedPathTypes))
	}
	return append(errs, validateIngressBackend(&p.Backend, fldPath.Child("backend"))...)
}

func validateIngressBackend(b *networkingv1.IngressBackend, fldPath *field.Path) field.ErrorList {
	switch {
	case b.Resource != nil && b.Service != nil:
		return field.ErrorList{field.Invalid(fldPath, "", "cannot set both resource and service backends")}
	case b.Resource != nil:
		return validateTypedLocalObjectReference(b.Resource.APIGroup, b.Resource.Kind, b.Resource.Name, fldPath.Child("resource"))
	case b.Service != nil:
		var errs field.ErrorList
		sp := fldPath.Child("service")
		if b.Service.Name == "" {
			errs = append(errs, field.Required(sp.Child("name"), ""))
		} else {
			errs = append(errs, validateName(b.Service.Name, nameIsDNS1035Label, sp.Child("name"))...)
		}
		port := b.Service.Port
		switch {
		case port.Name != "" && port.Number != 0:
			errs = append(errs, field.Invalid(fldPath, "", "cannot set both port name & port number"))
		case port.Name != "":
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(sp.Child("port", "name"), port.Name, msg))
			}
		case port.Number != 0:
			for _, msg := range validation.IsValidPortNum(int(port.Number)) {
				errs = append(errs, field.Invalid(sp.Child("port", "number"), port.Number, msg))
			}
		default:
			errs = append(errs, field.Required(fldPath, "port name or number is required"))
		}
		return errs
	default:
		return field.ErrorList{field.Invalid(fldPath, "", "resource or service backend is required")}
	}
}

func validateTypedLocalObjectReference(apiGroup *string, kind, name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if apiGroup != nil {
		errs = append(errs, validateDNS1123Subdomain(*apiGroup, fldPath.Child("apiGroup"))...)
	}
	for _, f := range []struct{ name, value string }{{"kind", kind}, {"name", name}} {
		if f.value == "" {
			errs = append(errs, field.Required(fldPath.Child(f.name), f.name+" is required"))
			continue
		}
		for _, msg := range path.IsValidPathSegmentName(f.value) {
			errs = append(errs, field.Invalid(fldPath.Child(f.name), f.value, msg))
		}
	}
	return errs
}

func validateIngressStatus(ing, old *networkingv1.Ingress) field.ErrorList {
	errs := validateMetaUpdate(&ing.ObjectMeta, &old.ObjectMeta)
	p := field.NewPath("status", "loadBalancer")
	for i, in := range ing.Status.LoadBalancer.Ingress {
		ip := p.Child("ingress").Index(i)
		if in.IP != "" {
			errs = append(errs, validation.IsValidIP(ip.Child("ip"), in.IP)...)
		}
		if in.Hostname != "" {
			errs = append(errs, validateDNS1123Subdomain(in.Hostname, ip.Child("hostname"))...)
			if net.ParseIP(in.Hostname) != nil {
				errs = append(errs, field.Invalid(ip.Child("hostname"), in.Hostname, "must be a DNS name, not an IP address"))
			}
		}
	}
	return errs
}

func validateIngressClass(ic *networkingv1.IngressClass) field.ErrorList {
	errs := validateMeta(&ic.ObjectMeta, false, nameIsDNSSubdomain)
	cp := specPath.Child("controller")
	if len(ic.Spec.Controller) > maxLenIngressClassController {
		errs = append(errs, field.TooLong(cp, "", maxLenIngressClassController))
	}
	errs = append(errs, validation.IsDomainPrefixedPath(cp, ic.Spec.Controller)...)
	if p := ic.Spec.Parameters; p != nil {
		pp := specPath.Child("parameters")
		errs = append(errs, validateTypedLocalObjectReference(p.APIGroup, p.Kind, p.Name, pp)...)
		scopes := []string{networkingv1.IngressClassParametersReferenceScopeCluster, networkingv1.IngressClassParametersReferenceScopeNamespace}
		switch scope := deref(p.Scope, "\x00"); scope {
		case "\x00":
			errs = append(errs, field.Required(pp.Child("scope"), ""))
		case networkingv1.IngressClassParametersReferenceScopeNamespace:
			if p.Namespace == nil {
				errs = append(errs, field.Required(pp.Child("namespace"), "`parameters.scope` is set to 'Namespace'"))
			} else {
				errs = append(errs, validateName(*p.Namespace, nameIsDNSLabel, pp.Child("namespace"))...)
			}
		case networkingv1.IngressClassParametersReferenceScopeCluster:
			if p.Namespace != nil {
				errs = append(errs, field.Forbidden(pp.Child("namespace"), "`parameters.scope` is set to 'Cluster'"))
			}
		default:
			errs = append(errs, field.NotSupported(pp.Child("scope"), scope, scopes))
		}
	}
	return errs
}

// validateIngressClassUpdate: the controller is fixed at creation.
func validateIngressClassUpdate(ic, old *networkingv1.IngressClass) field.ErrorList {
	errs := validateMetaUpdate(&ic.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateImmutable(ic.Spec.Controller, old.Spec.Controller, specPath.Child("controller"))...)
	return append(errs, validateIngressClass(ic)...)
}

// EndpointSlice limits.
const (
	maxTopologyLabels = 16
	maxAddresses      = 100
	maxPorts          = 100
	maxEndpoints      = 1000
)

var endpointSliceAddressTypes = []discoveryv1.AddressType{discoveryv1.AddressTypeFQDN, discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}

func validateEndpointSlice(es *discoveryv1.EndpointSlice) field.ErrorList {
	errs := validateMeta(&es.ObjectMeta, true, nameIsDNSSubdomain)
	ap := field.NewPath("addressType")
	switch {
	case es.AddressType == "":
		errs = append(errs, field.Required(ap, ""))
	case !sets.New(endpointSliceAddressTypes...).Has(es.AddressType):
		errs = append(errs, field.NotSupported(ap, es.AddressType, endpointSliceAddressTypes))
	}
	errs = append(errs, validateEndpointSliceEndpoints(es.Endpoints, es.AddressType, field.NewPath("endpoints"))...)
	return append(errs, validateEndpointSlicePorts(es.Ports, field.NewPath("ports"))...)
}

func validateEndpointSliceEndpoints(eps []discoveryv1.Endpoint, t discoveryv1.AddressType, fldPath *field.Path) field.ErrorList {
	if len(eps) > maxEndpoints {
		return field.ErrorList{field.TooMany(fldPath, len(eps), maxEndpoints)}
	}
	var errs field.ErrorList
	for i, ep := range eps {
		idx := fldPath.Index(i)
		ap := idx.Child("addresses")
		if len(ep.Addresses) == 0 {
			errs = append(errs, field.Required(ap, "must contain at least 1 address"))
		} else if len(ep.Addresses) > maxAddresses {
			errs = append(errs, field.TooMany(ap, len(ep.Addresses), maxAddresses))
		}
		for j, a := range ep.Addresses {
			errs = append(errs, validateEndpointSliceAddress(a, t, ap.Index(j))...)
		}
		tp := idx.Child("topology")
		if len(ep.DeprecatedTopology) > maxTopologyLabels {
			errs = append(errs, field.TooMany(tp, len(ep.DeprecatedTopology), maxTopologyLabels))
		}
		errs = append(errs, metavalidation.ValidateLabels(ep.DeprecatedTopology, tp)...)
		if ep.Hostname != nil {
			errs = append(errs, validateDNS1123Label(*ep.Hostname, idx.Child("hostname"))...)
		}
	}
	return errs
}

// validateEndpointSliceAddress checks an address against the slice's type.
func validateEndpointSliceAddress(a string, t discoveryv1.AddressType, fldPath *field.Path) field.ErrorList {
	switch t {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
		if e := validation.IsValidIP(fldPath, a); len(e) > 0 {
			return e
		}
		if fam, _ := familyOf(a); (t == discoveryv1.AddressTypeIPv4) != (fam == corev1.IPv4Protocol) {
			return field.ErrorList{field.Invalid(fldPath, a, fmt.Sprintf("must be a valid %s address", t))}
		}
		return validateNonSpecialIP(a, fldPath)
	case discoveryv1.AddressTypeFQDN:
		return validation.IsFullyQualifiedDomainName(fldPath, a)
	}
	return nil
}

func validateEndpointSlicePorts(ports []discoveryv1.EndpointPort, fldPath *field.Path) field.ErrorList {
	if len(ports) > maxPorts {
		return field.ErrorList{field.TooMany(fldPath, len(ports), maxPorts)}
	}
	var errs field.ErrorList
	names := sets.New[string]()
	for i, p := range ports {
		idx := fldPath.Index(i)
		name := deref(p.Name, "")
		if name != "" {
			errs = append(errs, validateDNS1123Label(name, idx.Child("name"))...)
		}
		if names.Has(name) {
			errs = append(errs, field.Duplicate(idx.Child("name"), p.Name))
		} else {
			names.Insert(name)
		}
		if p.Protocol == nil {
			errs = append(errs, field.Required(idx.Child("protocol"), ""))
		} else if !supportedPortProtocols.Has(*p.Protocol) {
			errs = append(errs, field.NotSupported(idx.Child("protocol"), *p.Protocol, sets.List(supportedPortProtocols)))
		}
		if p.AppProtocol != nil {
			for _, msg := range validation.IsQualifiedName(*p.AppProtocol) {
				errs = append(errs, field.Invalid(idx.Child("appProtocol"), p.AppProtocol, msg))
			}
		}
	}
	return errs
}

// validateEndpointSliceUpdate: the address type is fixed at creation.
func validateEndpointSliceUpdate(es, old *discoveryv1.EndpointSlice) field.ErrorList {
	errs := validateMetaUpdate(&es.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateEndpointSlice(es)...)
	return append(errs, validateImmutable(es.AddressType, old.AddressType, field.NewPath("addressType"))...)
}

// Validation of NetworkPolicies, as kube-apiserver's.

var policyTypes = []string{string(networkingv1.PolicyTypeIngress), string(networkingv1.PolicyTypeEgress)}

func validateNetworkPolicy(np *networkingv1.NetworkPolicy) field.ErrorList {
	errs := validateMeta(&np.ObjectMeta, true, nameIsDNSSubdomain)
	return append(errs, validateNetworkPolicySpec(&np.Spec, labelSelectorStrict, nil)...)
}

// validateNetworkPolicyUpdate lets an update keep what the old policy
// held that validation now refuses: a pod selector's label value, and its
// CIDRs (kube-apiserver's rules for objects stored by older versions).
func validateNetworkPolicyUpdate(np, old *networkingv1.NetworkPolicy) field.ErrorList {
	opts := labelSelectorStrict
	if len(metavalidation.ValidateLabelSelector(&old.Spec.PodSelector, labelSelectorStrict, nil)) > 0 {
		opts.AllowInvalidLabelValueInSelector = true
	}
	var oldCIDRs []string
	for _, peers := range networkPolicyPeers(&old.Spec) {
		for _, p := range peers {
			if p.IPBlock != nil {
				oldCIDRs = append(append(oldCIDRs, p.IPBlock.CIDR), p.IPBlock.Except...)
			}
		}
	}
	errs := validateMetaUpdate(&np.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateMeta(&np.ObjectMeta, true, nameIsDNSSubdomain)...)
	return append(errs, validateNetworkPolicySpec(&np.Spec, opts, oldCIDRs)...)
}

// networkPolicyPeers are the peers of every ingress and egress rule.
func networkPolicyPeers(s *networkingv1.NetworkPolicySpec) [][]networkingv1.NetworkPolicyPeer {
	var all [][]networkingv1.NetworkPolicyPeer
	for _, r := range s.Ingress {
		all = append(all, r.From)
	}
	for _, r := range s.Egress {
		all = append(all, r.To)
	}
	return all
}

func validateNetworkPolicySpec(s *networkingv1.NetworkPolicySpec, opts metavalidation.LabelSelectorValidationOptions, oldCIDRs []string) field.ErrorList {
	errs := metavalidation.ValidateLabelSelector(&s.PodSelector, opts, specPath.Child("podSelector"))
	rule := func(p *field.Path, ports []networkingv1.NetworkPolicyPort, peersName string, peers []networkingv1.NetworkPolicyPeer) {
		for i := range ports {
			errs = append(errs, validateNetworkPolicyPort(&ports[i], p.Child("ports").Index(i))...)
		}
		for i := range peers {
			errs = append(errs, validateNetworkPolicyPeer(&peers[i], opts, oldCIDRs, p.Child(peersName).Index(i))...)
		}
	}
	for i, r := range s.Ingress {
		rule(specPath.Child("ingress").Index(i), r.Ports, "from", r.From)
	}
	for i, r := range s.Egress {
		rule(specPath.Child("egress").Index(i), r.Ports, "to", r.To)
	}
	if len(s.PolicyTypes) > len(policyTypes) {
		return append(errs, field.Invalid(specPath.Child("policyTypes"), &s.PolicyTypes, "may not specify more than two policyTypes"))
	}
	for i, t := range s.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			errs = append(errs, field.NotSupported(specPath.Child("policyTypes").Index(i), t, policyTypes))
		}
	}
	return errs
}

func validateNetworkPolicyPort(port *networkingv1.NetworkPolicyPort, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pr := port.Protocol; pr != nil && *pr != corev1.ProtocolTCP && *pr != corev1.ProtocolUDP && *pr != corev1.ProtocolSCTP {
		errs = append(errs, field.NotSupported(p.Child("protocol"), *pr, []string{string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP)}))
	}
	switch {
	case port.Port == nil:
		if port.EndPort != nil {
			errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, "may not be specified when `port` is not specified"))
		}
	case port.Port.Type == intstr.Int:
		for _, msg := range validation.IsValidPortNum(int(port.Port.IntVal)) {
			errs = append(errs, field.Invalid(p.Child("port"), port.Port.IntVal, msg))
		}
		if port.EndPort != nil {
			if *port.EndPort < port.Port.IntVal {
				errs = append(errs, field.Invalid(p.Child("endPort"), port.Port.IntVal, "must be greater than or equal to `port`"))
			}
			for _, msg := range validation.IsValidPortNum(int(*port.EndPort)) {
				errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, msg))
			}
		}
	default:
		if port.EndPort != nil {
			errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, "may not be specified when `port` is non-numeric"))
		}
		for _, msg := range validation.IsValidPortName(port.Port.StrVal) {
			errs = append(errs, field.Invalid(p.Child("port"), port.Port.StrVal, msg))
		}
	}
	return errs
}

func validateNetworkPolicyPeer(peer *networkingv1.NetworkPolicyPeer, opts metavalidation.LabelSelectorValidationOptions, oldCIDRs []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	if peer.PodSelector != nil {
		n++
		errs = append(errs, metavalidation.ValidateLabelSelector(peer.PodSelector, opts, p.Child("podSelector"))...)
	}
	if peer.NamespaceSelector != nil {
		n++
		errs = append(errs, metavalidation.ValidateLabelSelector(peer.NamespaceSelector, opts, p.Child("namespaceSelector"))...)
	}
	if b := peer.IPBlock; b != nil {
		n++
		errs = append(errs, validateIPBlock(b, oldCIDRs, p.Child("ipBlock"))...)
	}
	switch {
	case n == 0:
		errs = append(errs, field.Required(p, "must specify a peer"))
	case n > 1 && peer.IPBlock != nil:
		errs = append(errs, field.Forbidden(p, "may not specify both ipBlock and another peer"))
	}
	return errs
}

func validateIPBlock(b *networkingv1.IPBlock, oldCIDRs []string, p *field.Path) field.ErrorList {
	if b.CIDR == "" {
		return field.ErrorList{field.Required(p.Child("cidr"), "")}
	}
	errs := validation.IsValidCIDRForLegacyField(p.Child("cidr"), b.CIDR, false, oldCIDRs)
	_, cidr, err := netutils.ParseCIDRSloppy(b.CIDR)
	if err != nil {
		return errs
	}
	bits, _ := cidr.Mask.Size()
	for i, e := range b.Except {
		ep := p.Child("except").Index(i)
		errs = append(errs, validation.IsValidCIDRForLegacyField(ep, e, false, oldCIDRs)...)
		_, except, err := netutils.ParseCIDRSloppy(e)
		if err != nil {
			continue
		}
		if eb, _ := except.Mask.Size(); !cidr.Contains(except.IP) || bits >= eb {
			errs = append(errs, field.Invalid(ep, e, "must be a strict subset of `cidr`"))
		}
	}
	return errs
}
