package strategy

import (
	"fmt"
	"net/url"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidatingWebhookConfiguration is the strategy of
// admissionregistration.k8s.io/v1 ValidatingWebhookConfigurations, cluster
// scoped, with kube-apiserver's v1 defaults and validation: see
// validateWebhooks. Its generation is 1 at creation and grows with every
// change of its webhooks.
var ValidatingWebhookConfiguration = &Kind[*admissionregistrationv1.ValidatingWebhookConfiguration]{
	defaults: func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
		defaultWebhooks(validatingWebhooks(c.Webhooks))
	},
	create: func(c *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
		errs := validateMeta(&c.ObjectMeta, false, nameIsDNSSubdomain)
		return append(errs, validateWebhooks(validatingWebhooks(c.Webhooks), strictWebhookRules)...)
	},
	update: func(c, old *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
		errs := validateMeta(&c.ObjectMeta, false, nameIsDNSSubdomain)
		errs = append(errs, validateMetaUpdate(&c.ObjectMeta, &old.ObjectMeta)...)
		hooks := validatingWebhooks(c.Webhooks)
		return append(errs, validateWebhooks(hooks, webhookUpdateRules(hooks, validatingWebhooks(old.Webhooks)))...)
	},
	onCreate: func(c *admissionregistrationv1.ValidatingWebhookConfiguration) { c.Generation = 1 },
	onUpdate: func(c, old *admissionregistrationv1.ValidatingWebhookConfiguration) {
		if !apiequality.Semantic.DeepEqual(c.Webhooks, old.Webhooks) {
			c.Generation = old.Generation + 1
		}
	},
}

// MutatingWebhookConfiguration is the strategy of
// admissionregistration.k8s.io/v1 MutatingWebhookConfigurations: as
// ValidatingWebhookConfiguration's, and the webhooks' reinvocationPolicy
// (default Never).
var MutatingWebhookConfiguration = &Kind[*admissionregistrationv1.MutatingWebhookConfiguration]{
	defaults: func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
		defaultWebhooks(mutatingWebhooks(c.Webhooks))
	},
	create: func(c *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
		errs := validateMeta(&c.ObjectMeta, false, nameIsDNSSubdomain)
		return append(errs, validateWebhooks(mutatingWebhooks(c.Webhooks), strictWebhookRules)...)
	},
	update: func(c, old *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
		errs := validateMeta(&c.ObjectMeta, false, nameIsDNSSubdomain)
		errs = append(errs, validateMetaUpdate(&c.ObjectMeta, &old.ObjectMeta)...)
		hooks := mutatingWebhooks(c.Webhooks)
		return append(errs, validateWebhooks(hooks, webhookUpdateRules(hooks, mutatingWebhooks(old.Webhooks)))...)
	},
	onCreate: func(c *admissionregistrationv1.MutatingWebhookConfiguration) { c.Generation = 1 },
	onUpdate: func(c, old *admissionregistrationv1.MutatingWebhookConfiguration) {
		if !apiequality.Semantic.DeepEqual(c.Webhooks, old.Webhooks) {
			c.Generation = old.Generation + 1
		}
	},
}

// webhook is a view of a ValidatingWebhook or a MutatingWebhook: the
// fields the two share, by pointer where the defaults set them, so both
// kinds are defaulted and validated by the same code.
type webhook struct {
	name                    string
	clientConfig            *admissionregistrationv1.WebhookClientConfig
	rules                   []admissionregistrationv1.RuleWithOperations
	failurePolicy           **admissionregistrationv1.FailurePolicyType
	matchPolicy             **admissionregistrationv1.MatchPolicyType
	namespaceSelector       **metav1.LabelSelector
	objectSelector          **metav1.LabelSelector
	sideEffects             **admissionregistrationv1.SideEffectClass
	timeoutSeconds          **int32
	admissionReviewVersions []string
	matchConditions         []admissionregistrationv1.MatchCondition
	// reinvocationPolicy is nil for a validating webhook, which has none.
	reinvocationPolicy **admissionregistrationv1.ReinvocationPolicyType
}

func validatingWebhooks(hs []admissionregistrationv1.ValidatingWebhook) []webhook {
	out := make([]webhook, len(hs))
	for i := range hs {
		h := &hs[i]
		out[i] = webhook{
			name: h.Name, clientConfig: &h.ClientConfig, rules: h.Rules,
			failurePolicy: &h.FailurePolicy, matchPolicy: &h.MatchPolicy,
			namespaceSelector: &h.NamespaceSelector, objectSelector: &h.ObjectSelector,
			sideEffects: &h.SideEffects, timeoutSeconds: &h.TimeoutSeconds,
			admissionReviewVersions: h.AdmissionReviewVersions, matchConditions: h.MatchConditions,
		}
	}
	return out
}

func mutatingWebhooks(hs []admissionregistrationv1.MutatingWebhook) []webhook {
	out := make([]webhook, len(hs))
	for i := range hs {
		h := &hs[i]
		out[i] = webhook{
			name: h.Name, clientConfig: &h.ClientConfig, rules: h.Rules,
			failurePolicy: &h.FailurePolicy, matchPolicy: &h.MatchPolicy,
			namespaceSelector: &h.NamespaceSelector, objectSelector: &h.ObjectSelector,
			sideEffects: &h.SideEffects, timeoutSeconds: &h.TimeoutSeconds,
			admissionReviewVersions: h.AdmissionReviewVersions, matchConditions: h.MatchConditions,
			reinvocationPolicy: &h.ReinvocationPolicy,
		}
	}
	return out
}

// Defaults of v1 webhooks. sideEffects and admissionReviewVersions have
// none in v1: they are required.
const (
	defaultWebhookTimeoutSeconds int32 = 10
	defaultWebhookServicePort    int32 = 443
)

// defaultWebhooks fills in kube-apiserver's v1 defaults: failurePolicy
// Fail, matchPolicy Equivalent, empty (match-all) namespace and object
// selectors, a 10 s timeout, reinvocationPolicy Never (mutating), the
// rules' scope "*" and a service's port 443.
func defaultWebhooks(hooks []webhook) {
	for _, h := range hooks {
		if *h.failurePolicy == nil {
			*h.failurePolicy = ptrTo(admissionregistrationv1.Fail)
		}
		if *h.matchPolicy == nil {
			*h.matchPolicy = ptrTo(admissionregistrationv1.Equivalent)
		}
		if *h.namespaceSelector == nil {
			*h.namespaceSelector = &metav1.LabelSelector{}
		}
		if *h.objectSelector == nil {
			*h.objectSelector = &metav1.LabelSelector{}
		}
		if *h.timeoutSeconds == nil {
			*h.timeoutSeconds = ptrTo(defaultWebhookTimeoutSeconds)
		}
		if h.reinvocationPolicy != nil && *h.reinvocationPolicy == nil {
			*h.reinvocationPolicy = ptrTo(admissionregistrationv1.NeverReinvocationPolicy)
		}
		if s := h.clientConfig.Service; s != nil && s.Port == nil {
			s.Port = ptrTo(defaultWebhookServicePort)
		}
		for i := range h.rules {
			if h.rules[i].Scope == nil {
				h.rules[i].Scope = ptrTo(admissionregistrationv1.AllScopes)
			}
		}
	}
}

// webhookRules are the checks of validateWebhooks that an update keeps
// only if the stored configuration passes them, so that a configuration
// stored under older rules can still be changed.
type webhookRules struct {
	// matchConditions: check the match conditions (skipped when no
	// webhook's conditions change).
	matchConditions bool
	// noSideEffects: sideEffects must be None or NoneOnDryRun, rather
	// than any side-effect class.
	noSideEffects bool
	// knownReviewVersion: admissionReviewVersions must name a version
	// the server speaks.
	knownReviewVersion bool
	// uniqueNames: the webhooks' names must differ.
	uniqueNames bool
	// selector: the options of the label selectors' check.
	selector metavalidation.LabelSelectorValidationOptions
}

// strictWebhookRules are the rules of a new configuration.
var strictWebhookRules = webhookRules{matchConditions: true, noSideEffects: true, knownReviewVersion: true, uniqueNames: true}

// webhookUpdateRules are the rules of an update of old to hooks: each
// relaxed rule is one the stored webhooks break.
func webhookUpdateRules(hooks, old []webhook) webhookRules {
	r := webhookRules{noSideEffects: true, knownReviewVersion: true, uniqueNames: true}
	r.matchConditions = len(hooks) != len(old)
	names := map[string]bool{}
	for i, h := range old {
		if !r.matchConditions && !apiequality.Semantic.DeepEqual(hooks[i].matchConditions, h.matchConditions) {
			r.matchConditions = true
		}
		if se := *h.sideEffects; se == nil || !noSideEffectClasses.Has(*se) {
			r.noSideEffects = false
		}
		if len(h.admissionReviewVersions) > 0 && !hasKnownReviewVersion(h.admissionReviewVersions) {
			r.knownReviewVersion = false
		}
		if names[h.name] {
			r.uniqueNames = false
		}
		names[h.name] = true
		for _, sel := range []*metav1.LabelSelector{*h.namespaceSelector, *h.objectSelector} {
			if sel != nil && len(metavalidation.ValidateLabelSelector(sel, labelSelectorStrict, nil)) > 0 {
				r.selector.AllowInvalidLabelValueInSelector = true
			}
		}
	}
	return r
}

// valueSet is a set of the allowed values of a field, which it lists in
// the order given (sorted, as Kubernetes lists them).
type valueSet[T ~string] []T

func (s valueSet[T]) Has(v T) bool {
	for _, a := range s {
		if a == v {
			return true
		}
	}
	return false
}

func (s valueSet[T]) strings() []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return out
}

var (
	failurePolicies = valueSet[admissionregistrationv1.FailurePolicyType]{admissionregistrationv1.Fail, admissionregistrationv1.Ignore}
	matchPolicies   = valueSet[admissionregistrationv1.MatchPolicyType]{admissionregistrationv1.Equivalent, admissionregistrationv1.Exact}
	// noSideEffectClasses are the classes a v1 webhook may declare.
	noSideEffectClasses = valueSet[admissionregistrationv1.SideEffectClass]{admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.SideEffectClassNoneOnDryRun}
	// sideEffectClasses are all classes, which a webhook stored under
	// v1beta1 may keep.
	sideEffectClasses = valueSet[admissionregistrationv1.SideEffectClass]{
		admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.SideEffectClassNoneOnDryRun,
		admissionregistrationv1.SideEffectClassSome, admissionregistrationv1.SideEffectClassUnknown,
	}
	reinvocationPolicies = valueSet[admissionregistrationv1.ReinvocationPolicyType]{admissionregistrationv1.IfNeededReinvocationPolicy, admissionregistrationv1.NeverReinvocationPolicy}
	webhookOperations    = valueSet[admissionregistrationv1.OperationType]{
		admissionregistrationv1.OperationAll, admissionregistrationv1.Connect, admissionregistrationv1.Create,
		admissionregistrationv1.Delete, admissionregistrationv1.Update,
	}
	ruleScopes = valueSet[admissionregistrationv1.ScopeType]{admissionregistrationv1.AllScopes, admissionregistrationv1.ClusterScope, admissionregistrationv1.NamespacedScope}
)

// admissionReviewVersions are the AdmissionReview versions the server
// sends; a webhook must accept one of them.
var admissionReviewVersions = []string{"v1", "v1beta1"}

func hasKnownReviewVersion(versions []string) bool {
	for _, v := range versions {
		for _, k := range admissionReviewVersions {
			if v == k {
				return true
			}
		}
	}
	return false
}

// maxMatchConditions is how many match conditions a webhook may have.
const maxMatchConditions = 64

// validateWebhooks validates the webhooks of a configuration, as
// kube-apiserver's v1 validation: each name a fully qualified domain name
// of at least three segments, unique in the configuration; the AdmissionReview
// versions; exactly one of an https url or a service to call; the rules;
// the policies; sideEffects given; the timeout; the selectors; the match
// conditions (their names and that they have an expression, which is not
// compiled here).
func validateWebhooks(hooks []webhook, r webhookRules) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, h := range hooks {
		p := field.NewPath("webhooks").Index(i)
		errs = append(errs, validateWebhook(h, r, p)...)
		errs = append(errs, validateAdmissionReviewVersions(h.admissionReviewVersions, r.knownReviewVersion, p.Child("admissionReviewVersions"))...)
		if r.uniqueNames && h.name != "" {
			if names[h.name] {
				errs = append(errs, field.Duplicate(p.Child("name"), h.name))
			}
			names[h.name] = true
		}
	}
	return errs
}

func validateWebhook(h webhook, r webhookRules, p *field.Path) field.ErrorList {
	errs := validation.IsFullyQualifiedName(p.Child("name"), h.name)
	for i := range h.rules {
		errs = append(errs, validateWebhookRule(&h.rules[i], p.Child("rules").Index(i))...)
	}
	if fp := *h.failurePolicy; fp != nil && !failurePolicies.Has(*fp) {
		errs = append(errs, field.NotSupported(p.Child("failurePolicy"), *fp, failurePolicies.strings()))
	}
	if mp := *h.matchPolicy; mp != nil && !matchPolicies.Has(*mp) {
		errs = append(errs, field.NotSupported(p.Child("matchPolicy"), *mp, matchPolicies.strings()))
	}
	allowed := sideEffectClasses
	if r.noSideEffects {
		allowed = noSideEffectClasses
	}
	switch se := *h.sideEffects; {
	case se == nil:
		errs = append(errs, field.Required(p.Child("sideEffects"), "must specify one of "+strings.Join(allowed.strings(), ", ")))
	case !allowed.Has(*se):
		errs = append(errs, field.NotSupported(p.Child("sideEffects"), *se, allowed.strings()))
	}
	if t := *h.timeoutSeconds; t != nil && (*t < 1 || *t > 30) {
		errs = append(errs, field.Invalid(p.Child("timeoutSeconds"), *t, "the timeout value must be between 1 and 30 seconds"))
	}
	if sel := *h.namespaceSelector; sel != nil {
		errs = append(errs, metavalidation.ValidateLabelSelector(sel, r.selector, p.Child("namespaceSelector"))...)
	}
	if sel := *h.objectSelector; sel != nil {
		errs = append(errs, metavalidation.ValidateLabelSelector(sel, r.selector, p.Child("objectSelector"))...)
	}
	if h.reinvocationPolicy != nil {
		if rp := *h.reinvocationPolicy; rp != nil && !reinvocationPolicies.Has(*rp) {
			errs = append(errs, field.NotSupported(p.Child("reinvocationPolicy"), *rp, reinvocationPolicies.strings()))
		}
	}
	errs = append(errs, validateWebhookClientConfig(h.clientConfig, p.Child("clientConfig"))...)
	if r.matchConditions {
		errs = append(errs, validateMatchConditions(h.matchConditions, p.Child("matchConditions"))...)
	}
	return errs
}

// validateAdmissionReviewVersions: at least one version, no repeats, each
// a DNS-1035 label, and (when known) one the server sends.
func validateAdmissionReviewVersions(versions []string, known bool, p *field.Path) field.ErrorList {
	if len(versions) == 0 {
		return field.ErrorList{field.Required(p, "must specify one of "+strings.Join(admissionReviewVersions, ", "))}
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, v := range versions {
		if seen[v] {
			errs = append(errs, field.Invalid(p.Index(i), v, "duplicate version"))
			continue
		}
		seen[v] = true
		for _, msg := range validation.IsDNS1035Label(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, msg))
		}
	}
	if known && !hasKnownReviewVersion(versions) {
		errs = append(errs, field.Invalid(p, versions, "must include at least one of "+strings.Join(admissionReviewVersions, ", ")))
	}
	return errs
}

func validateWebhookClientConfig(cc *admissionregistrationv1.WebhookClientConfig, p *field.Path) field.ErrorList {
	switch {
	case (cc.URL == nil) == (cc.Service == nil):
		return field.ErrorList{field.Required(p, "exactly one of url or service is required")}
	case cc.URL != nil:
		return validateWebhookURL(*cc.URL, p.Child("url"))
	default:
		return validateWebhookService(cc.Service, p.Child("service"))
	}
}

// validateWebhookURL: an absolute https URL without user information,
// query or fragment.
func validateWebhookURL(raw string, p *field.Path) field.ErrorList {
	const form = "; desired format: https://host[/path]"
	u, err := url.Parse(raw)
	if err != nil {
		return field.ErrorList{field.Required(p, "url must be a valid URL: "+err.Error()+form)}
	}
	var errs field.ErrorList
	if u.Scheme != "https" {
		errs = append(errs, field.Invalid(p, u.Scheme, "'https' is the only allowed URL scheme"+form))
	}
	if u.Host == "" {
		errs = append(errs, field.Invalid(p, u.Host, "host must be specified"+form))
	}
	if u.User != nil {
		errs = append(errs, field.Invalid(p, u.User.String(), "user information is not permitted in the URL"))
	}
	if u.Fragment != "" {
		errs = append(errs, field.Invalid(p, u.Fragment, "fragments are not permitted in the URL"))
	}
	if u.RawQuery != "" {
		errs = append(errs, field.Invalid(p, u.RawQuery, "query parameters are not permitted in the URL"))
	}
	return errs
}

// validateWebhookService: a name, a namespace, a port number and a path
// of DNS-1123 subdomain segments after its leading "/".
func validateWebhookService(s *admissionregistrationv1.ServiceReference, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	if s.Namespace == "" {
		errs = append(errs, field.Required(p.Child("namespace"), ""))
	}
	// The port is defaulted before validation; unset counts as the default.
	port := deref(s.Port, defaultWebhookServicePort)
	if msgs := validation.IsValidPortNum(int(port)); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("port"), port, "port is not valid: "+strings.Join(msgs, ", ")))
	}
	if s.Path == nil {
		return errs
	}
	path, pp := *s.Path, p.Child("path")
	switch path {
	case "", "/":
		return errs
	case "//":
		return append(errs, field.Invalid(pp, path, "segment[0] may not be empty"))
	}
	if !strings.HasPrefix(path, "/") {
		errs = append(errs, field.Invalid(pp, path, "must start with a '/'"))
	}
	// As kube-apiserver, the first character is dropped whatever it is,
	// and one trailing "/" is allowed.
	for i, seg := range strings.Split(strings.TrimSuffix(path[1:], "/"), "/") {
		if seg == "" {
			errs = append(errs, field.Invalid(pp, path, fmt.Sprintf("segment[%d] may not be empty", i)))
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(seg) {
			errs = append(errs, field.Invalid(pp, path, fmt.Sprintf("segment[%d]: %v", i, msg)))
		}
	}
	return errs
}

func hasWildcard[T ~string](values []T) bool {
	for _, v := range values {
		if v == "*" {
			return true
		}
	}
	return false
}

// validateWebhookRule: operations, API groups, API versions and
// resources each given, "*" alone in its list, and a known scope.
func validateWebhookRule(r *admissionregistrationv1.RuleWithOperations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	op := p.Child("operations")
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(op, ""))
	}
	if len(r.Operations) > 1 && hasWildcard(r.Operations) {
		errs = append(errs, field.Invalid(op, r.Operations, "if '*' is present, must not specify other operations"))
	}
	for i, o := range r.Operations {
		if !webhookOperations.Has(o) {
			errs = append(errs, field.NotSupported(op.Index(i), o, webhookOperations.strings()))
		}
	}
	gp := p.Child("apiGroups")
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(gp, ""))
	}
	if len(r.APIGroups) > 1 && hasWildcard(r.APIGroups) {
		errs = append(errs, field.Invalid(gp, r.APIGroups, "if '*' is present, must not specify other API groups"))
	}
	// A group may be empty: the core group.
	vp := p.Child("apiVersions")
	if len(r.APIVersions) == 0 {
		errs = append(errs, field.Required(vp, ""))
	}
	if len(r.APIVersions) > 1 && hasWildcard(r.APIVersions) {
		errs = append(errs, field.Invalid(vp, r.APIVersions, "if '*' is present, must not specify other API versions"))
	}
	for i, v := range r.APIVersions {
		if v == "" {
			errs = append(errs, field.Required(vp.Index(i), ""))
		}
	}
	errs = append(errs, validateRuleResources(r.Resources, p.Child("resources"))...)
	if s := r.Scope; s != nil && !ruleScopes.Has(*s) {
		errs = append(errs, field.NotSupported(p.Child("scope"), *s, ruleScopes.strings()))
	}
	return errs
}

// validateRuleResources checks a rule's resources, "resource" or
// "resource/subresource" with "*" for all: none empty; "*/*" alone; "*"
// with no other resource without a subresource; no "a/x" after "a/*" and
// no "x/b" after "*/b".
func validateRuleResources(resources []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(resources) == 0 {
		errs = append(errs, field.Required(p, ""))
	}
	allSubresourcesOf := map[string]bool{} // "a" of "a/*"
	subresourceOfAll := map[string]bool{}  // "b" of "*/b"
	var allOfAll, all, plain bool
	for i, rs := range resources {
		if rs == "" {
			errs = append(errs, field.Required(p.Index(i), ""))
			continue
		}
		allOfAll = allOfAll || rs == "*/*"
		all = all || rs == "*"
		res, sub, ok := strings.Cut(rs, "/")
		if !ok {
			// As kube-apiserver, only the last entry without a
			// subresource decides whether one besides "*" is given.
			plain = rs != "*"
			continue
		}
		if allSubresourcesOf[res] {
			errs = append(errs, field.Invalid(p.Index(i), rs, fmt.Sprintf("if '%s/*' is present, must not specify %s", res, rs)))
		}
		if subresourceOfAll[sub] {
			errs = append(errs, field.Invalid(p.Index(i), rs, fmt.Sprintf("if '*/%s' is present, must not specify %s", sub, rs)))
		}
		if sub == "*" {
			allSubresourcesOf[res] = true
		}
		if res == "*" {
			subresourceOfAll[sub] = true
		}
	}
	if len(resources) > 1 && allOfAll {
		errs = append(errs, field.Invalid(p, resources, "if '*/*' is present, must not specify other resources"))
	}
	if all && plain {
		errs = append(errs, field.Invalid(p, resources, "if '*' is present, must not specify other resources without subresources"))
	}
	return errs
}

// validateMatchConditions: at most 64, each with a qualified name unique
// among them and an expression. (The expressions are CEL, which is not
// compiled here.)
func validateMatchConditions(conds []admissionregistrationv1.MatchCondition, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(conds) > maxMatchConditions {
		errs = append(errs, field.TooMany(p, len(conds), maxMatchConditions))
	}
	names := map[string]bool{}
	for i, c := range conds {
		cp := p.Index(i)
		if strings.TrimSpace(c.Expression) == "" {
			errs = append(errs, field.Required(cp.Child("expression"), ""))
		}
		if c.Name == "" {
			errs = append(errs, field.Required(cp.Child("name"), ""))
			continue
		}
		errs = append(errs, validateQualifiedName(c.Name, cp.Child("name"))...)
		if names[c.Name] {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		}
		names[c.Name] = true
	}
	return errs
}
