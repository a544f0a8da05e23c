package strategy

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// EndpointSlice is the strategy of discovery.k8s.io/v1 EndpointSlices.
var EndpointSlice = &Kind[*discoveryv1.EndpointSlice]{namespaced: true, defaults: defaultEndpointSlice, create: validateEndpointSlice, update: validateEndpointSliceUpdate}

// Ingress is the strategy of networking.k8s.io/v1 Ingresses. (The default
// IngressClass is given by the registry's Ingress admission.)
var Ingress = &Kind[*networkingv1.Ingress]{namespaced: true, create: validateIngress, update: validateIngressUpdate, status: validateIngressStatus}

// IngressClass is the strategy of networking.k8s.io/v1 IngressClasses.
var IngressClass = &Kind[*networkingv1.IngressClass]{defaults: defaultIngressClass, create: validateIngressClass, update: validateIngressClassUpdate}

// NetworkPolicy is the strategy of networking.k8s.io/v1 NetworkPolicies.
var NetworkPolicy = &Kind[*networkingv1.NetworkPolicy]{namespaced: true, defaults: defaultNetworkPolicy,
	create: validateNetworkPolicy, update: validateNetworkPolicyUpdate}
