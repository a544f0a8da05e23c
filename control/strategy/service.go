package strategy

import corev1 "k8s.io/api/core/v1"

// Service is the strategy of core/v1 Services. (Its cluster IPs and node
// ports are allocated by the registry's Service admission.)
var Service = &Kind[*corev1.Service]{namespaced: true, defaults: defaultService, create: validateService, update: validateServiceUpdate, status: validateServiceStatus}
