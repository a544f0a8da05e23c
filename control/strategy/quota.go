package strategy

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ResourceQuota is the strategy of core/v1 ResourceQuotas: the quota
// controller and admission own the status.
var ResourceQuota = &Kind[*corev1.ResourceQuota]{namespaced: true, create: validateResourceQuota, update: validateResourceQuotaUpdate,
	status: validateResourceQuotaStatusUpdate}

// LimitRange is the strategy of core/v1 LimitRanges.
var LimitRange = &Kind[*corev1.LimitRange]{namespaced: true, defaults: defaultLimitRange, create: validateLimitRange,
	update: func(lr, old *corev1.LimitRange) field.ErrorList {
		return append(validateMetaUpdate(&lr.ObjectMeta, &old.ObjectMeta), validateLimitRange(lr)...)
	}, onCreate: func(*corev1.LimitRange) {}}

// quotaResources are the resource names a quota may limit without a
// domain, as Kubernetes' standard quota resources.
var quotaResources = sets.New(
	"cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.storage", "requests.ephemeral-storage",
	"limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods", "resourcequotas", "services", "replicationcontrollers",
	"secrets", "persistentvolumeclaims", "configmaps", "services.nodeports", "services.loadbalancers",
)

// The scopes of quotas, and the resources each applies to.
var (
	quotaScopes = sets.New(corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating,
		corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort, corev1.ResourceQuotaScopePriorityClass,
		corev1.ResourceQuotaScopeCrossNamespacePodAffinity)
	podCountResources   = sets.New[corev1.ResourceName]("pods")
	podComputeResources = sets.New[corev1.ResourceName]("cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory")
)

// IsQuotaResource reports whether a quota may limit name without a
// domain (a standard quota resource, or hugepages requests).
func IsQuotaResource(name corev1.ResourceName) bool {
	return quotaResources.Has(string(name)) || strings.HasPrefix(string(name), requestsPrefix+hugePagesPrefix)
}

// ScopeAppliesTo reports whether the scope can limit the resource: the
// pod scopes limit pods and their compute resources, BestEffort only
// the count of pods.
func ScopeAppliesTo(scope corev1.ResourceQuotaScope, name corev1.ResourceName) bool {
	switch scope {
	case corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeNotBestEffort,
		corev1.ResourceQuotaScopePriorityClass, corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return podCountResources.Has(name) || podComputeResources.Has(name)
	case corev1.ResourceQuotaScopeBestEffort:
		return podCountResources.Has(name)
	}
	return true
}

func validateQuotaResourceName(name corev1.ResourceName, fldPath *field.Path) field.ErrorList {
	errs := validateResourceName(name, fldPath)
	if !strings.Contains(string(name), "/") && !IsQuotaResource(name) {
		errs = append(errs, field.Invalid(fldPath, name, "must be a standard resource for quota"))
	}
	return errs
}

func validateQuotaList(l corev1.ResourceList, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedResourceNames(l) {
		p := fldPath.Key(string(k))
		errs = append(errs, validateQuotaResourceName(k, p)...)
		errs = append(errs, validateResourceQuantityValue(k, l[k], p)...)
	}
	return errs
}

// conflictingScopes are the pairs of scopes one quota may not have both of.
var conflictingScopes = [][2]corev1.ResourceQuotaScope{
	{corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort},
	{corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating},
}

func validateQuotaSpec(spec *corev1.ResourceQuotaSpec, fldPath *field.Path) field.ErrorList {
	errs := validateQuotaList(spec.Hard, fldPath.Child("hard"))
	hard := sortedResourceNames(spec.Hard)
	scopesValid := func(scope corev1.ResourceQuotaScope, p *field.Path, value any) field.ErrorList {
		var errs field.ErrorList
		for _, k := range hard {
			if IsQuotaResource(k) && !ScopeAppliesTo(scope, k) {
				errs = append(errs, field.Invalid(p, value, "unsupported scope applied to resource"))
			}
		}
		return errs
	}
	conflicts := func(scopes sets.Set[corev1.ResourceQuotaScope], p *field.Path) field.ErrorList {
		var errs field.ErrorList
		for _, pair := range conflictingScopes {
			if scopes.HasAll(pair[0], pair[1]) {
				errs = append(errs, field.Invalid(p, spec.Scopes, "conflicting scopes"))
			}
		}
		return errs
	}
	if len(spec.Scopes) > 0 {
		p := fldPath.Child("scopes")
		scopes := sets.New[corev1.ResourceQuotaScope]()
		for _, scope := range spec.Scopes {
			if !quotaScopes.Has(scope) {
				errs = append(errs, field.Invalid(p, spec.Scopes, "unsupported scope"))
			}
			errs = append(errs, scopesValid(scope, p, spec.Scopes)...)
			scopes.Insert(scope)
		}
		errs = append(errs, conflicts(scopes, p)...)
	}
	if sel := spec.ScopeSelector; sel != nil {
		p := fldPath.Child("scopeSelector", "matchExpressions")
		scopes := sets.New[corev1.ResourceQuotaScope]()
		for _, req := range sel.MatchExpressions {
			if !quotaScopes.Has(req.ScopeName) {
				errs = append(errs, field.Invalid(p.Child("scopeName"), req.ScopeName, "unsupported scope"))
			}
			errs = append(errs, scopesValid(req.ScopeName, p, sel)...)
			if req.ScopeName != corev1.ResourceQuotaScopePriorityClass && req.Operator != corev1.ScopeSelectorOpExists {
				errs = append(errs, field.Invalid(p.Child("operator"), req.Operator,
					"must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, "+
						"ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"))
			}
			switch req.Operator {
			case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
				if len(req.Values) == 0 {
					errs = append(errs, field.Required(p.Child("values"), "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
				}
			case corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpDoesNotExist:
				if len(req.Values) != 0 {
					errs = append(errs, field.Invalid(p.Child("values"), req.Values, "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
				}
			default:
				errs = append(errs, field.Invalid(p.Child("operator"), req.Operator, "not a valid selector operator"))
			}
			scopes.Insert(req.ScopeName)
		}
		errs = append(errs, conflicts(scopes, p)...)
	}
	return errs
}

func validateResourceQuota(q *corev1.ResourceQuota) field.ErrorList {
	errs := validateMeta(&q.ObjectMeta, true, nameIsDNSSubdomain)
	errs = append(errs, validateQuotaSpec(&q.Spec, field.NewPath("spec"))...)
	errs = append(errs, validateQuotaList(q.Status.Hard, field.NewPath("status", "hard"))...)
	return append(errs, validateQuotaList(q.Status.Used, field.NewPath("status", "used"))...)
}

func validateResourceQuotaUpdate(q, old *corev1.ResourceQuota) field.ErrorList {
	errs := validateMetaUpdate(&q.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateQuotaSpec(&q.Spec, field.NewPath("spec"))...)
	if !sets.New(q.Spec.Scopes...).Equal(sets.New(old.Spec.Scopes...)) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "scopes"), q.Spec.Scopes, fieldImmutable))
	}
	return errs
}

func validateResourceQuotaStatusUpdate(q, old *corev1.ResourceQuota) field.ErrorList {
	errs := validateMetaUpdate(&q.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateQuotaList(q.Status.Hard, field.NewPath("status", "hard"))...)
	return append(errs, validateQuotaList(q.Status.Used, field.NewPath("status", "used"))...)
}

// defaultLimitRange fills a Container limit's defaults as Kubernetes
// does: the default limit is the max, the default request the default
// limit, or else the min.
func defaultLimitRange(lr *corev1.LimitRange) {
	for i := range lr.Spec.Limits {
		l := &lr.Spec.Limits[i]
		if l.Type != corev1.LimitTypeContainer {
			continue
		}
		if l.Default == nil {
			l.Default = corev1.ResourceList{}
		}
		if l.DefaultRequest == nil {
			l.DefaultRequest = corev1.ResourceList{}
		}
		for k, v := range l.Max {
			if _, ok := l.Default[k]; !ok {
				l.Default[k] = v.DeepCopy()
			}
		}
		for _, from := range []corev1.ResourceList{l.Default, l.Min} {
			for k, v := range from {
				if _, ok := l.DefaultRequest[k]; !ok {
					l.DefaultRequest[k] = v.DeepCopy()
				}
			}
		}
	}
}

var limitTypes = sets.New(corev1.LimitTypePod, corev1.LimitTypeContainer, corev1.LimitTypePersistentVolumeClaim)

func validateLimitRange(lr *corev1.LimitRange) field.ErrorList {
	errs := validateMeta(&lr.ObjectMeta, true, nameIsDNSSubdomain)
	seen := sets.New[corev1.LimitType]()
	fldPath := field.NewPath("spec", "limits")
	for i := range lr.Spec.Limits {
		p, l := fldPath.Index(i), &lr.Spec.Limits[i]
		msgs := validation.IsQualifiedName(string(l.Type))
		for _, msg := range msgs {
			errs = append(errs, field.Invalid(p.Child("type"), l.Type, msg))
		}
		if len(msgs) == 0 && !strings.Contains(string(l.Type), "/") && !limitTypes.Has(l.Type) {
			errs = append(errs, field.Invalid(p.Child("type"), l.Type, "must be a standard limit type or fully qualified"))
		}
		if seen.Has(l.Type) {
			errs = append(errs, field.Duplicate(p.Child("type"), l.Type))
		}
		seen.Insert(l.Type)
		name := func(k corev1.ResourceName, p *field.Path) field.ErrorList {
			if l.Type == corev1.LimitTypePod || l.Type == corev1.LimitTypeContainer {
				return validateContainerResourceName(k, p)
			}
			return validateResourceName(k, p)
		}
		lists := []struct {
			field string
			l     corev1.ResourceList
		}{{"max", l.Max}, {"min", l.Min}, {"default", l.Default}, {"defaultRequest", l.DefaultRequest}, {"maxLimitRequestRatio", l.MaxLimitRequestRatio}}
		keys := sets.New[corev1.ResourceName]()
		for _, list := range lists {
			if l.Type == corev1.LimitTypePod && (list.field == "default" || list.field == "defaultRequest") {
				if len(list.l) > 0 {
					errs = append(errs, field.Forbidden(p.Child(list.field), "may not be specified when `type` is 'Pod'"))
				}
				continue
			}
			for _, k := range sortedResourceNames(list.l) {
				errs = append(errs, name(k, p.Child(list.field).Key(string(k)))...)
				keys.Insert(k)
			}
		}
		if l.Type == corev1.LimitTypePersistentVolumeClaim {
			_, hasMin := l.Min[corev1.ResourceStorage]
			_, hasMax := l.Max[corev1.ResourceStorage]
			if !hasMin && !hasMax {
				errs = append(errs, field.Required(p.Child("limits"), "either minimum or maximum storage value is required, but neither was provided"))
			}
		}
		for _, k := range sets.List(keys) {
			errs = append(errs, validateLimitValues(l, k, p)...)
		}
	}
	return errs
}

// validateLimitValues checks that one resource's values in a limit are
// in order: min ≤ default request ≤ default ≤ max, and the ratio.
func validateLimitValues(l *corev1.LimitRangeItem, k corev1.ResourceName, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	key := string(k)
	minQ, hasMin := l.Min[k]
	maxQ, hasMax := l.Max[k]
	def, hasDef := l.Default[k]
	req, hasReq := l.DefaultRequest[k]
	ratio, hasRatio := l.MaxLimitRequestRatio[k]
	check := func(ok bool, a, b resource.Quantity, path *field.Path, value resource.Quantity, format string) {
		if ok && a.Cmp(b) > 0 {
			errs = append(errs, field.Invalid(path.Key(key), value, fmt.Sprintf(format, a.String(), b.String())))
		}
	}
	check(hasMin && hasMax, minQ, maxQ, p.Child("min"), minQ, "min value %s is greater than max value %s")
	check(hasReq && hasMin, minQ, req, p.Child("defaultRequest"), req, "min value %s is greater than default request value %s")
	check(hasReq && hasMax, req, maxQ, p.Child("defaultRequest"), req, "default request value %s is greater than max value %s")
	check(hasReq && hasDef, req, def, p.Child("defaultRequest"), req, "default request value %s is greater than default limit value %s")
	check(hasDef && hasMin, minQ, def, p.Child("default"), minQ, "min value %s is greater than default value %s")
	check(hasDef && hasMax, def, maxQ, p.Child("default"), maxQ, "default value %s is greater than max value %s")
	if hasRatio && ratio.Cmp(*resource.NewQuantity(1, resource.DecimalSI)) < 0 {
		errs = append(errs, field.Invalid(p.Child("maxLimitRequestRatio").Key(key), ratio, fmt.Sprintf("ratio %s is less than 1", ratio.String())))
	}
	if hasRatio && hasMin && hasMax {
		r, lo, hi := float64(ratio.Value()), minQ.Value(), maxQ.Value()
		if ratio.Value() < resource.MaxMilliValue && lo < resource.MaxMilliValue && hi < resource.MaxMilliValue {
			r, lo, hi = float64(ratio.MilliValue())/1000, minQ.MilliValue(), maxQ.MilliValue()
		}
		if most := float64(hi) / float64(lo); r > most {
			errs = append(errs, field.Invalid(p.Child("maxLimitRequestRatio").Key(key), ratio, fmt.Sprintf("ratio %s is greater than max/min = %f", ratio.String(), most)))
		}
	}
	if !isOvercommitAllowed(k) && hasDef && hasReq && def.Cmp(req) != 0 {
		errs = append(errs, field.Invalid(p.Child("defaultRequest").Key(key), req, fmt.Sprintf("default value %s must equal to defaultRequest value %s in %s", def.String(), req.String(), key)))
	}
	return errs
}
