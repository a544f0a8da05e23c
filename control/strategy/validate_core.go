package strategy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validation of Namespaces, Nodes, ConfigMaps, Secrets, ServiceAccounts,
// Events and Leases.

// maxConfigSize is the most data a ConfigMap or Secret may hold (1 MiB).
const maxConfigSize = corev1.MaxSecretSize

func validateNamespace(n *corev1.Namespace) field.ErrorList {
	errs := validateMeta(&n.ObjectMeta, false, nameIsDNSLabel)
	// Kubernetes reports these without an index.
	for _, f := range n.Spec.Finalizers {
		errs = append(errs, validateFinalizerName(string(f), field.NewPath("spec", "finalizers"))...)
	}
	return errs
}

func validateFinalizerName(name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return append(errs, validateKubeFinalizerName(name, fldPath)...)
}

func validateNamespaceUpdate(n, old *corev1.Namespace) field.ErrorList {
	return validateMetaUpdate(&n.ObjectMeta, &old.ObjectMeta)
}

func validateNamespaceStatus(n, old *corev1.Namespace) field.ErrorList {
	errs := validateMetaUpdate(&n.ObjectMeta, &old.ObjectMeta)
	p := field.NewPath("status", "Phase")
	if n.DeletionTimestamp.IsZero() {
		if n.Status.Phase != corev1.NamespaceActive {
			errs = append(errs, field.Invalid(p, n.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty"))
		}
	} else if n.Status.Phase != corev1.NamespaceTerminating {
		errs = append(errs, field.Invalid(p, n.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty"))
	}
	return errs
}

func validateNode(n *corev1.Node) field.ErrorList {
	errs := validateMeta(&n.ObjectMeta, false, nameIsDNSSubdomain)
	errs = append(errs, validateNodeTaints(n.Spec.Taints, metadataPath.Child("taints"))...)
	errs = append(errs, validateNodeResources(n)...)
	p := field.NewPath("spec", "podCIDRs")
	for i, c := range n.Spec.PodCIDRs {
		errs = append(errs, validation.IsValidCIDR(p.Index(i), c)...)
	}
	if len(n.Spec.PodCIDRs) > 1 {
		if len(n.Spec.PodCIDRs) > 2 || cidrFamily(n.Spec.PodCIDRs[0]) == cidrFamily(n.Spec.PodCIDRs[1]) {
			errs = append(errs, field.Invalid(p, n.Spec.PodCIDRs, "may specify no more than one CIDR for each IP family"))
		}
		seen := sets.New[string]()
		for i, c := range n.Spec.PodCIDRs {
			if seen.Has(c) {
				errs = append(errs, field.Duplicate(p.Index(i), c))
			}
			seen.Insert(c)
		}
	}
	return errs
}

func cidrFamily(cidr string) string {
	ip, _, _ := strings.Cut(cidr, "/")
	f, _ := familyOf(ip)
	return string(f)
}

func validateNodeResources(n *corev1.Node) field.ErrorList {
	var errs field.ErrorList
	for _, l := range []struct {
		name string
		list corev1.ResourceList
	}{{"capacity", n.Status.Capacity}, {"allocatable", n.Status.Allocatable}} {
		for _, k := range sortedResourceNames(l.list) {
			errs = append(errs, validateResourceQuantityValue(k, l.list[k], field.NewPath("status", l.name, string(k)))...)
		}
	}
	return errs
}

func validateNodeTaints(taints []corev1.Taint, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	unique := map[corev1.TaintEffect]sets.Set[string]{}
	for i, t := range taints {
		idx := fldPath.Index(i)
		errs = append(errs, metavalidation.ValidateLabelName(t.Key, idx.Child("key"))...)
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) != 0 {
			errs = append(errs, field.Invalid(idx.Child("value"), t.Value, strings.Join(msgs, ";")))
		}
		errs = append(errs, validateTaintEffect(t.Effect, false, idx.Child("effect"))...)
		if unique[t.Effect].Has(t.Key) {
			e := field.Duplicate(idx, t)
			e.Detail = "taints must be unique by key and effect pair"
			errs = append(errs, e)
			continue
		}
		if unique[t.Effect] == nil {
			unique[t.Effect] = sets.New[string]()
		}
		unique[t.Effect].Insert(t.Key)
	}
	return errs
}

// validateNodeUpdate: once set, podCIDRs and providerID may not change.
// It also checks status writes (the node status strategy does the same).
func validateNodeUpdate(n, old *corev1.Node) field.ErrorList {
	errs := validateMetaUpdate(&n.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateNodeResources(n)...)
	addrs := map[corev1.NodeAddress]bool{}
	for i, a := range n.Status.Addresses {
		if addrs[a] {
			errs = append(errs, field.Duplicate(field.NewPath("status", "addresses").Index(i), a))
		}
		addrs[a] = true
	}
	if len(old.Spec.PodCIDRs) > 0 && !reflect.DeepEqual(old.Spec.PodCIDRs, n.Spec.PodCIDRs) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "podCIDRs"), "node updates may not change podCIDR except from \"\" to valid"))
	}
	if old.Spec.ProviderID != "" && old.Spec.ProviderID != n.Spec.ProviderID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "providerID"), "node updates may not change providerID except from \"\" to valid"))
	}
	errs = append(errs, validateNodeTaints(n.Spec.Taints, metadataPath.Child("taints"))...)
	if n.Spec.DoNotUseExternalID != old.Spec.DoNotUseExternalID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "externalID"), "may not be updated"))
	}
	return errs
}

func validateConfigMap(c *corev1.ConfigMap) field.ErrorList {
	errs := validateMeta(&c.ObjectMeta, true, nameIsDNSSubdomain)
	size := 0
	for _, k := range sets.List(sets.KeySet(c.Data)) {
		p := field.NewPath("data").Key(k)
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(p, k, msg))
		}
		if _, dup := c.BinaryData[k]; dup {
			errs = append(errs, field.Invalid(p, k, "duplicate of key present in binaryData"))
		}
		size += len(c.Data[k])
	}
	for _, k := range sets.List(sets.KeySet(c.BinaryData)) {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(k), k, msg))
		}
		size += len(c.BinaryData[k])
	}
	if size > maxConfigSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", maxConfigSize))
	}
	return errs
}

// validateConfigMapUpdate: an immutable ConfigMap keeps its data and stays
// immutable.
func validateConfigMapUpdate(c, old *corev1.ConfigMap) field.ErrorList {
	errs := validateMetaUpdate(&c.ObjectMeta, &old.ObjectMeta)
	if deref(old.Immutable, false) {
		if !deref(c.Immutable, false) {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(c.Data, old.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(c.BinaryData, old.BinaryData) {
			errs = append(errs, field.Forbidden(field.NewPath("binaryData"), "field is immutable when `immutable` is set"))
		}
	}
	return append(errs, validateConfigMap(c)...)
}

func validateSecret(s *corev1.Secret) field.ErrorList {
	errs := validateMeta(&s.ObjectMeta, true, nameIsDNSSubdomain)
	dp := field.NewPath("data")
	size := 0
	for _, k := range sets.List(sets.KeySet(s.Data)) {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(dp.Key(k), k, msg))
		}
		size += len(s.Data[k])
	}
	if size > maxConfigSize {
		errs = append(errs, field.TooLong(dp, "", maxConfigSize))
	}
	requireKey := func(k string) {
		if _, ok := s.Data[k]; !ok {
			errs = append(errs, field.Required(dp.Key(k), ""))
		}
	}
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(metadataPath.Child("annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg, corev1.SecretTypeDockerConfigJson:
		key := corev1.DockerConfigKey
		if s.Type == corev1.SecretTypeDockerConfigJson {
			key = corev1.DockerConfigJsonKey
		}
		b, ok := s.Data[key]
		if !ok {
			requireKey(key)
			break
		}
		if err := json.Unmarshal(b, &map[string]any{}); err != nil {
			errs = append(errs, field.Invalid(dp.Key(key), "<secret contents redacted>", err.Error()))
		}
	case corev1.SecretTypeBasicAuth:
		_, u := s.Data[corev1.BasicAuthUsernameKey]
		_, p := s.Data[corev1.BasicAuthPasswordKey]
		if !u && !p {
			requireKey(corev1.BasicAuthUsernameKey)
			requireKey(corev1.BasicAuthPasswordKey)
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(dp.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		requireKey(corev1.TLSCertKey)
		requireKey(corev1.TLSPrivateKeyKey)
	}
	return errs
}

// validateSecretUpdate: the type never changes; an immutable Secret keeps
// its data and stays immutable.
func validateSecretUpdate(s, old *corev1.Secret) field.ErrorList {
	errs := validateMetaUpdate(&s.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateImmutable(s.Type, old.Type, field.NewPath("type"))...)
	if deref(old.Immutable, false) {
		if !deref(s.Immutable, false) {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(s.Data, old.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
	}
	return append(errs, validateSecret(s)...)
}

func validateServiceAccount(sa *corev1.ServiceAccount) field.ErrorList {
	return validateMeta(&sa.ObjectMeta, true, nameIsDNSSubdomain)
}

func validateServiceAccountUpdate(sa, old *corev1.ServiceAccount) field.ErrorList {
	return append(validateMetaUpdate(&sa.ObjectMeta, &old.ObjectMeta), validateServiceAccount(sa)...)
}

// Event limits of the events API.
const (
	reportingInstanceLengthLimit = 128
	actionLengthLimit            = 128
	reasonLengthLimit            = 128
	noteLengthLimit              = 1024
)

// validateEvent is Kubernetes' validation of core/v1 Events: the event's
// namespace must agree with its object's, and events with an eventTime
// must name their reporter, action and reason.
func validateEvent(e *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	nsPath := field.NewPath("involvedObject", "namespace")
	if e.EventTime.IsZero() {
		if e.InvolvedObject.Namespace == "" {
			if e.Namespace != metav1.NamespaceNone && e.Namespace != metav1.NamespaceDefault {
				errs = append(errs, field.Invalid(nsPath, e.InvolvedObject.Namespace, "does not match event.namespace"))
			}
		} else if e.Namespace != e.InvolvedObject.Namespace {
			errs = append(errs, field.Invalid(nsPath, e.InvolvedObject.Namespace, "does not match event.namespace"))
		}
	} else {
		if e.InvolvedObject.Namespace == "" && e.Namespace != metav1.NamespaceDefault && e.Namespace != metav1.NamespaceSystem {
			errs = append(errs, field.Invalid(nsPath, e.InvolvedObject.Namespace, "does not match event.namespace"))
		}
		if e.ReportingController == "" {
			errs = append(errs, field.Required(field.NewPath("reportingController"), ""))
		}
		errs = append(errs, validateQualifiedName(e.ReportingController, field.NewPath("reportingController"))...)
		errs = append(errs, requiredWithLimit(e.ReportingInstance, reportingInstanceLengthLimit, field.NewPath("reportingInstance"))...)
		errs = append(errs, requiredWithLimit(e.Action, actionLengthLimit, field.NewPath("action"))...)
		errs = append(errs, requiredWithLimit(e.Reason, reasonLengthLimit, field.NewPath("reason"))...)
		if len(e.Message) > noteLengthLimit {
			errs = append(errs, field.Invalid(field.NewPath("message"), "", fmt.Sprintf("can have at most %v characters", noteLengthLimit)))
		}
	}
	return append(errs, validateDNS1123Subdomain(e.Namespace, field.NewPath("namespace"))...)
}

func requiredWithLimit(v string, limit int, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v == "" {
		errs = append(errs, field.Required(fldPath, ""))
	}
	if len(v) > limit {
		errs = append(errs, field.Invalid(fldPath, "", fmt.Sprintf("can have at most %v characters", limit)))
	}
	return errs
}

// validateEventUpdate: core/v1 Events may change freely (their count and
// timestamps are updated in place).
func validateEventUpdate(e, _ *corev1.Event) field.ErrorList {
	return validateEvent(e)
}

func validateLease(l *coordinationv1.Lease) field.ErrorList {
	return append(validateMeta(&l.ObjectMeta, true, nameIsDNSSubdomain), validateLeaseSpec(&l.Spec)...)
}

func validateLeaseSpec(s *coordinationv1.LeaseSpec) field.ErrorList {
	var errs field.ErrorList
	if s.LeaseDurationSeconds != nil && *s.LeaseDurationSeconds <= 0 {
		errs = append(errs, field.Invalid(specPath.Child("leaseDurationSeconds"), s.LeaseDurationSeconds, "must be greater than 0"))
	}
	if s.LeaseTransitions != nil && *s.LeaseTransitions < 0 {
		errs = append(errs, field.Invalid(specPath.Child("leaseTransitions"), s.LeaseTransitions, "must be greater than or equal to 0"))
	}
	if s.Strategy != nil {
		p := specPath.Child("strategy").Child("strategy")
		if !strings.Contains(string(*s.Strategy), "/") {
			if *s.Strategy != coordinationv1.OldestEmulationVersion {
				errs = append(errs, field.NotSupported(p, *s.Strategy, []coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion}))
			}
		} else {
			errs = append(errs, validateQualifiedName(string(*s.Strategy), p)...)
		}
	}
	if s.PreferredHolder != nil && *s.PreferredHolder != "" && (s.Strategy == nil || *s.Strategy == "") {
		errs = append(errs, field.Forbidden(specPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

func validateLeaseUpdate(l, old *coordinationv1.Lease) field.ErrorList {
	return append(validateMetaUpdate(&l.ObjectMeta, &old.ObjectMeta), validateLeaseSpec(&l.Spec)...)
}

// A PodTemplate is a pod template kept on its own, for whoever makes pods
// from it: its template is checked as a workload's is.
func defaultPodTemplateObject(t *corev1.PodTemplate) { defaultPodTemplate(&t.Template) }

func validatePodTemplateObject(t *corev1.PodTemplate) field.ErrorList {
	errs := validateMeta(&t.ObjectMeta, true, nameIsDNSSubdomain)
	return append(errs, validatePodTemplateSpec(&t.Template, field.NewPath("template"))...)
}

func validatePodTemplateObjectUpdate(t, old *corev1.PodTemplate) field.ErrorList {
	errs := validateMetaUpdate(&t.ObjectMeta, &old.ObjectMeta)
	return append(errs, validatePodTemplateObject(t)...)
}
