package strategy

import (
	"cmp"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The strategies of the small core/v1 kinds.

// Namespace is the strategy of core/v1 Namespaces. A new namespace is
// Active and gets the kubernetes finalizer; a deleted one turns
// Terminating and stays until the namespace controller, having emptied
// it, removes its spec finalizers.
var Namespace = &Kind[*corev1.Namespace]{defaults: defaultNamespace, create: validateNamespace, update: validateNamespaceUpdate, status: validateNamespaceStatus,
	onCreate: func(o *corev1.Namespace) {
		o.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
		if len(o.Spec.Finalizers) == 0 {
			o.Spec.Finalizers = []corev1.FinalizerName{corev1.FinalizerKubernetes}
		}
	},
	beginDelete: func(o *corev1.Namespace, _ metav1.DeleteOptions) (int64, bool) {
		o.Status.Phase = corev1.NamespaceTerminating
		return 0, len(o.Spec.Finalizers) > 0
	},
	heldBack: func(o *corev1.Namespace) bool { return len(o.Spec.Finalizers) > 0 },
}

// NamespaceFields are the field selectors of Namespaces.
var NamespaceFields = fields(map[string]func(*corev1.Namespace) string{
	"status.phase": func(o *corev1.Namespace) string { return string(o.Status.Phase) },
})

// Node is the strategy of core/v1 Nodes. The node agent reports its status
// with the Node, so a create keeps it, and a status write changes no
// labels, annotations, finalizers or owners (keepWriterMeta).
var Node = &Kind[*corev1.Node]{defaults: defaultNode, create: validateNode, update: validateNodeUpdate, status: validateNodeUpdate,
	onCreate: func(*corev1.Node) {}, statusMeta: keepWriterMeta}

// NodeFields are the field selectors of Nodes.
var NodeFields = fields(map[string]func(*corev1.Node) string{
	"spec.unschedulable": func(o *corev1.Node) string { return strconv.FormatBool(o.Spec.Unschedulable) },
})

// ConfigMap is the strategy of core/v1 ConfigMaps.
var ConfigMap = &Kind[*corev1.ConfigMap]{namespaced: true, defaults: defaultConfigMap, create: validateConfigMap, update: validateConfigMapUpdate}

// Secret is the strategy of core/v1 Secrets.
var Secret = &Kind[*corev1.Secret]{namespaced: true, defaults: defaultSecret, create: validateSecret, update: validateSecretUpdate}

// SecretFields are the field selectors of Secrets.
var SecretFields = fields(map[string]func(*corev1.Secret) string{
	"type": func(o *corev1.Secret) string { return string(o.Type) },
})

// ServiceAccount is the strategy of core/v1 ServiceAccounts.
var ServiceAccount = &Kind[*corev1.ServiceAccount]{namespaced: true, create: validateServiceAccount, update: validateServiceAccountUpdate}

// Event is the strategy of core/v1 Events.
var Event = &Kind[*corev1.Event]{namespaced: true, create: validateEvent, update: validateEventUpdate}

// EventFields are the field selectors of Events.
var EventFields = fields(map[string]func(*corev1.Event) string{
	"involvedObject.kind":            func(o *corev1.Event) string { return o.InvolvedObject.Kind },
	"involvedObject.namespace":       func(o *corev1.Event) string { return o.InvolvedObject.Namespace },
	"involvedObject.name":            func(o *corev1.Event) string { return o.InvolvedObject.Name },
	"involvedObject.uid":             func(o *corev1.Event) string { return string(o.InvolvedObject.UID) },
	"involvedObject.apiVersion":      func(o *corev1.Event) string { return o.InvolvedObject.APIVersion },
	"involvedObject.resourceVersion": func(o *corev1.Event) string { return o.InvolvedObject.ResourceVersion },
	"involvedObject.fieldPath":       func(o *corev1.Event) string { return o.InvolvedObject.FieldPath },
	"reason":                         func(o *corev1.Event) string { return o.Reason },
	"reportingComponent":             func(o *corev1.Event) string { return o.ReportingController },
	// Events of the events.k8s.io API have no source: their reporting
	// controller stands for it, as in Kubernetes.
	"source": func(o *corev1.Event) string { return cmp.Or(o.Source.Component, o.ReportingController) },
	"type":   func(o *corev1.Event) string { return o.Type },
})

// Endpoints is the strategy of core/v1 Endpoints.
var Endpoints = &Kind[*corev1.Endpoints]{namespaced: true, defaults: defaultEndpoints, create: validateEndpoints, update: validateEndpointsUpdate}

// PodTemplate is the strategy of core/v1 PodTemplates.
var PodTemplate = &Kind[*corev1.PodTemplate]{namespaced: true, defaults: defaultPodTemplateObject, create: validatePodTemplateObject, update: validatePodTemplateObjectUpdate}
