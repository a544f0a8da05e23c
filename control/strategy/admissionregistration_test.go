package strategy

import (
	"fmt"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A configuration as a user writes it: no defaults. Its first webhook
// calls a URL, its second a Service.
const validatingWebhookManifest = `{
  "metadata": {"name": "policy", "resourceVersion": "1"},
  "webhooks": [{
    "name": "pods.policy.example.com",
    "clientConfig": {"url": "https://policy.example.com:8443/validate"},
    "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods", "pods/status"]}],
    "sideEffects": "None",
    "admissionReviewVersions": ["v1", "v1beta1"],
    "matchConditions": [{"name": "not-kube-system", "expression": "request.namespace != 'kube-system'"}]
  }, {
    "name": "deployments.policy.example.com",
    "clientConfig": {"service": {"namespace": "policy", "name": "webhook", "path": "/validate/deployments"}},
    "rules": [{"operations": ["*"], "apiGroups": ["apps"], "apiVersions": ["*"], "resources": ["*/scale", "deployments"], "scope": "Namespaced"}],
    "sideEffects": "NoneOnDryRun",
    "timeoutSeconds": 5,
    "failurePolicy": "Ignore",
    "namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]},
    "admissionReviewVersions": ["v1"]
  }]
}`

func validValidatingWebhookConfiguration(t *testing.T) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	decode(t, validatingWebhookManifest, c)
	ValidatingWebhookConfiguration.PrepareForCreate(c)
	return c
}

func validMutatingWebhookConfiguration(t *testing.T) *admissionregistrationv1.MutatingWebhookConfiguration {
	t.Helper()
	c := &admissionregistrationv1.MutatingWebhookConfiguration{}
	decode(t, validatingWebhookManifest, c)
	MutatingWebhookConfiguration.PrepareForCreate(c)
	return c
}

// TestWebhookConfigurationDefaults: the v1 defaults of kube-apiserver, and
// generation 1 at creation.
func TestWebhookConfigurationDefaults(t *testing.T) {
	c := validValidatingWebhookConfiguration(t)
	checkErrs(t, ValidatingWebhookConfiguration.ValidateCreate(c))
	jsonEqual(t, c, `{
	  "metadata": {"name": "policy", "resourceVersion": "1", "generation": 1},
	  "webhooks": [{
	    "name": "pods.policy.example.com",
	    "clientConfig": {"url": "https://policy.example.com:8443/validate"},
	    "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods", "pods/status"], "scope": "*"}],
	    "failurePolicy": "Fail",
	    "matchPolicy": "Equivalent",
	    "namespaceSelector": {},
	    "objectSelector": {},
	    "sideEffects": "None",
	    "timeoutSeconds": 10,
	    "admissionReviewVersions": ["v1", "v1beta1"],
	    "matchConditions": [{"name": "not-kube-system", "expression": "request.namespace != 'kube-system'"}]
	  }, {
	    "name": "deployments.policy.example.com",
	    "clientConfig": {"service": {"namespace": "policy", "name": "webhook", "path": "/validate/deployments", "port": 443}},
	    "rules": [{"operations": ["*"], "apiGroups": ["apps"], "apiVersions": ["*"], "resources": ["*/scale", "deployments"], "scope": "Namespaced"}],
	    "failurePolicy": "Ignore",
	    "matchPolicy": "Equivalent",
	    "namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]},
	    "objectSelector": {},
	    "sideEffects": "NoneOnDryRun",
	    "timeoutSeconds": 5,
	    "admissionReviewVersions": ["v1"]
	  }]
	}`)

	m := validMutatingWebhookConfiguration(t)
	checkErrs(t, MutatingWebhookConfiguration.ValidateCreate(m))
	for i, h := range m.Webhooks {
		if h.ReinvocationPolicy == nil || *h.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy {
			t.Errorf("webhooks[%d].reinvocationPolicy %v, want Never", i, h.ReinvocationPolicy)
		}
		if h.FailurePolicy == nil || h.MatchPolicy == nil || h.NamespaceSelector == nil || h.ObjectSelector == nil || h.TimeoutSeconds == nil {
			t.Errorf("webhooks[%d] not defaulted: %+v", i, h)
		}
	}
	if m.Generation != 1 {
		t.Errorf("generation %d, want 1", m.Generation)
	}
	// A policy that is given stays.
	m = &admissionregistrationv1.MutatingWebhookConfiguration{Webhooks: []admissionregistrationv1.MutatingWebhook{{
		ReinvocationPolicy: ptrTo(admissionregistrationv1.IfNeededReinvocationPolicy),
		ClientConfig:       admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Port: ptrTo(int32(8443))}},
	}}}
	MutatingWebhookConfiguration.PrepareForCreate(m)
	if *m.Webhooks[0].ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy || *m.Webhooks[0].ClientConfig.Service.Port != 8443 {
		t.Errorf("defaults replaced given values: %+v", m.Webhooks[0])
	}
}

// vwc shortens the cases' changes.
type vwc = admissionregistrationv1.ValidatingWebhookConfiguration

// webhookCase is a change to the valid configuration's webhooks (given as
// validating webhooks, applied to both kinds) and the errors it gives.
type webhookCase struct {
	name   string
	change func(c *vwc)
	want   []wantErr
}

func hook0(c *vwc) *admissionregistrationv1.ValidatingWebhook {
	return &c.Webhooks[0]
}

func rule0(c *vwc) *admissionregistrationv1.RuleWithOperations {
	return &c.Webhooks[0].Rules[0]
}

func service1(c *vwc) *admissionregistrationv1.ServiceReference {
	return c.Webhooks[1].ClientConfig.Service
}

var badWebhookCases = []webhookCase{
	{"name not a subdomain", func(c *vwc) { c.Name = "Policy_1" },
		[]wantErr{{field.ErrorTypeInvalid, "metadata.name", ""}}},
	{"namespaced", func(c *vwc) { c.Namespace = "default" },
		[]wantErr{{field.ErrorTypeForbidden, "metadata.namespace", ""}}},

	// Webhook names.
	{"no webhook name", func(c *vwc) { hook0(c).Name = "" },
		[]wantErr{{field.ErrorTypeRequired, "webhooks[0].name", ""}}},
	{"webhook name of two segments", func(c *vwc) { hook0(c).Name = "policy.example" },
		[]wantErr{{field.ErrorTypeInvalid, "webhooks[0].name", "should be a domain with at least three segments separated by dots"}}},
	{"webhook name not a subdomain", func(c *vwc) { hook0(c).Name = "Pods.policy.example.com" },
		[]wantErr{{field.ErrorTypeInvalid, "webhooks[0].name", "RFC 1123 subdomain"}}},
	{"duplicate webhook name", func(c *vwc) { c.Webhooks[1].Name = hook0(c).Name },
		[]wantErr{{field.ErrorTypeDuplicate, "webhooks[1].name", ""}}},

	// AdmissionReview versions.
	{"no review versions", func(c *vwc) { hook0(c).AdmissionReviewVersions = nil },
		[]wantErr{{field.ErrorTypeRequired, "webhooks[0].admissionReviewVersions", "must specify one of v1, v1beta1"}}},
	{"unknown review versions only", func(c *vwc) {
		hook0(c).AdmissionReviewVersions = []string{"v2"}
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[0].admissionReviewVersions", "must include at least one of v1, v1beta1"}}},
	{"duplicate review version", func(c *vwc) {
		hook0(c).AdmissionReviewVersions = []string{"v1", "v1"}
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[0].admissionReviewVersions[1]", "duplicate version"}}},
	{"review version not a label", func(c *vwc) {
		hook0(c).AdmissionReviewVersions = []string{"v1", "V.2"}
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[0].admissionReviewVersions[1]", "DNS-1035 label"}}},

	// Client config.
	{"url and service", func(c *vwc) {
		hook0(c).ClientConfig.Service = service1(c)
	}, []wantErr{{field.ErrorTypeRequired, "webhooks[0].clientConfig", "exactly one of url or service is required"}}},
	{"neither url nor service", func(c *vwc) { hook0(c).ClientConfig.URL = nil },
		[]wantErr{{field.ErrorTypeRequired, "webhooks[0].clientConfig", "exactly one of url or service is required"}}},
	{"http url", func(c *vwc) {
		hook0(c).ClientConfig.URL = ptrTo("http://policy.example.com/validate")
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[0].clientConfig.url", "'https' is the only allowed URL scheme"}}},
	{"relative url", func(c *vwc) { hook0(c).ClientConfig.URL = ptrTo("/validate") },
		[]wantErr{{field.ErrorTypeInvalid, "webhooks[0].clientConfig.url", "host must be specified"}}},
	{"url with user", func(c *vwc) {
		hook0(c).ClientConfig.URL = ptrTo("https://admin:secret@policy.example.com/validate")
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[0].clientConfig.url", "user information is not permitted in the URL"}}},
	{"url with fragment", func(c *vwc) {
		hook0(c).ClientConfig.URL = ptrTo("https://policy.example.com/validate#pods")
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[0].clientConfig.url", "fragments are not permitted in the URL"}}},
	{"url with query", func(c *vwc) {
		hook0(c).ClientConfig.URL = ptrTo("https://policy.example.com/validate?kind=pods")
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[0].clientConfig.url", "query parameters are not permitted in the URL"}}},
	{"unparsable url", func(c *vwc) {
		hook0(c).ClientConfig.URL = ptrTo("https://policy example.com/%zz")
	}, []wantErr{{field.ErrorTypeRequired, "webhooks[0].clientConfig.url", "url must be a valid URL"}}},
	{"service without name and namespace", func(c *vwc) {
		service1(c).Name, service1(c).Namespace = "", ""
	}, []wantErr{
		{field.ErrorTypeRequired, "webhooks[1].clientConfig.service.name", ""},
		{field.ErrorTypeRequired, "webhooks[1].clientConfig.service.namespace", ""},
	}},
	{"service port 0", func(c *vwc) { service1(c).Port = ptrTo(int32(0)) },
		[]wantErr{{field.ErrorTypeInvalid, "webhooks[1].clientConfig.service.port", "port is not valid: must be between 1 and 65535"}}},
	{"service port too high", func(c *vwc) { service1(c).Port = ptrTo(int32(65536)) },
		[]wantErr{{field.ErrorTypeInvalid, "webhooks[1].clientConfig.service.port", "port is not valid"}}},
	{"service path without slash", func(c *vwc) { service1(c).Path = ptrTo("validate") },
		[]wantErr{{field.ErrorTypeInvalid, "webhooks[1].clientConfig.service.path", "must start with a '/'"}}},
	{"service path with empty segment", func(c *vwc) { service1(c).Path = ptrTo("/validate//pods") },
		[]wantErr{{field.ErrorTypeInvalid, "webhooks[1].clientConfig.service.path", "segment[1] may not be empty"}}},
	{"service path //", func(c *vwc) { service1(c).Path = ptrTo("//") },
		[]wantErr{{field.ErrorTypeInvalid, "webhooks[1].clientConfig.service.path", "segment[0] may not be empty"}}},
	{"service path segment not a subdomain", func(c *vwc) {
		service1(c).Path = ptrTo("/validate/Pods_1/")
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[1].clientConfig.service.path", "segment[1]: a lowercase RFC 1123 subdomain"}}},

	// Rules.
	{"no operations", func(c *vwc) { rule0(c).Operations = nil },
		[]wantErr{{field.ErrorTypeRequired, "webhooks[0].rules[0].operations", ""}}},
	{"unknown operation", func(c *vwc) {
		rule0(c).Operations = []admissionregistrationv1.OperationType{"CREATE", "PATCH"}
	}, []wantErr{{field.ErrorTypeNotSupported, "webhooks[0].rules[0].operations[1]", `"*", "CONNECT", "CREATE", "DELETE", "UPDATE"`}}},
	{"* among operations", func(c *vwc) {
		rule0(c).Operations = []admissionregistrationv1.OperationType{"CREATE", "*"}
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[0].rules[0].operations", "if '*' is present, must not specify other operations"}}},
	{"no api groups", func(c *vwc) { rule0(c).APIGroups = nil },
		[]wantErr{{field.ErrorTypeRequired, "webhooks[0].rules[0].apiGroups", ""}}},
	{"* among api groups", func(c *vwc) { rule0(c).APIGroups = []string{"", "*"} },
		[]wantErr{{field.ErrorTypeInvalid, "webhooks[0].rules[0].apiGroups", "if '*' is present, must not specify other API groups"}}},
	{"no api versions", func(c *vwc) { rule0(c).APIVersions = nil },
		[]wantErr{{field.ErrorTypeRequired, "webhooks[0].rules[0].apiVersions", ""}}},
	{"empty api version", func(c *vwc) { rule0(c).APIVersions = []string{"v1", ""} },
		[]wantErr{{field.ErrorTypeRequired, "webhooks[0].rules[0].apiVersions[1]", ""}}},
	{"* among api versions", func(c *vwc) { rule0(c).APIVersions = []string{"*", "v1"} },
		[]wantErr{{field.ErrorTypeInvalid, "webhooks[0].rules[0].apiVersions", "if '*' is present, must not specify other API versions"}}},
	{"no resources", func(c *vwc) { rule0(c).Resources = nil },
		[]wantErr{{field.ErrorTypeRequired, "webhooks[0].rules[0].resources", ""}}},
	{"empty resource", func(c *vwc) { rule0(c).Resources = []string{"pods", ""} },
		[]wantErr{{field.ErrorTypeRequired, "webhooks[0].rules[0].resources[1]", ""}}},
	{"*/* among resources", func(c *vwc) {
		rule0(c).Resources = []string{"*/*", "pods/status"}
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[0].rules[0].resources", "if '*/*' is present, must not specify other resources"}}},
	{"* with a resource", func(c *vwc) {
		rule0(c).Resources = []string{"*", "pods"}
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[0].rules[0].resources", "if '*' is present, must not specify other resources without subresources"}}},
	{"subresource of pods/*", func(c *vwc) {
		rule0(c).Resources = []string{"pods/*", "pods/status"}
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[0].rules[0].resources[1]", "if 'pods/*' is present, must not specify pods/status"}}},
	{"resource of */status", func(c *vwc) {
		rule0(c).Resources = []string{"*/status", "pods/status"}
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[0].rules[0].resources[1]", "if '*/status' is present, must not specify pods/status"}}},
	{"unknown scope", func(c *vwc) {
		rule0(c).Scope = ptrTo(admissionregistrationv1.ScopeType("Global"))
	}, []wantErr{{field.ErrorTypeNotSupported, "webhooks[0].rules[0].scope", `"*", "Cluster", "Namespaced"`}}},

	// Policies, side effects, timeout.
	{"unknown failure policy", func(c *vwc) {
		hook0(c).FailurePolicy = ptrTo(admissionregistrationv1.FailurePolicyType("Retry"))
	}, []wantErr{{field.ErrorTypeNotSupported, "webhooks[0].failurePolicy", `"Fail", "Ignore"`}}},
	{"unknown match policy", func(c *vwc) {
		hook0(c).MatchPolicy = ptrTo(admissionregistrationv1.MatchPolicyType("Fuzzy"))
	}, []wantErr{{field.ErrorTypeNotSupported, "webhooks[0].matchPolicy", `"Equivalent", "Exact"`}}},
	{"no side effects", func(c *vwc) { hook0(c).SideEffects = nil },
		[]wantErr{{field.ErrorTypeRequired, "webhooks[0].sideEffects", "must specify one of None, NoneOnDryRun"}}},
	{"side effects Some", func(c *vwc) {
		hook0(c).SideEffects = ptrTo(admissionregistrationv1.SideEffectClassSome)
	}, []wantErr{{field.ErrorTypeNotSupported, "webhooks[0].sideEffects", `"None", "NoneOnDryRun"`}}},
	{"side effects Unknown", func(c *vwc) {
		hook0(c).SideEffects = ptrTo(admissionregistrationv1.SideEffectClassUnknown)
	}, []wantErr{{field.ErrorTypeNotSupported, "webhooks[0].sideEffects", ""}}},
	{"timeout 0", func(c *vwc) { hook0(c).TimeoutSeconds = ptrTo(int32(0)) },
		[]wantErr{{field.ErrorTypeInvalid, "webhooks[0].timeoutSeconds", "the timeout value must be between 1 and 30 seconds"}}},
	{"timeout 31", func(c *vwc) { hook0(c).TimeoutSeconds = ptrTo(int32(31)) },
		[]wantErr{{field.ErrorTypeInvalid, "webhooks[0].timeoutSeconds", "the timeout value must be between 1 and 30 seconds"}}},

	// Selectors.
	{"bad namespace selector operator", func(c *vwc) {
		c.Webhooks[1].NamespaceSelector.MatchExpressions[0].Operator = "Like"
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[1].namespaceSelector.matchExpressions[0].operator", "not a valid selector operator"}}},
	{"bad namespace selector value", func(c *vwc) {
		c.Webhooks[1].NamespaceSelector.MatchExpressions[0].Values = []string{"not a value!"}
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[1].namespaceSelector.matchExpressions[0].values[0]", ""}}},
	{"bad object selector label", func(c *vwc) {
		hook0(c).ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[0].objectSelector.matchLabels", ""}}},

	// Match conditions.
	{"too many match conditions", func(c *vwc) {
		hook0(c).MatchConditions = nil
		for i := range 65 {
			hook0(c).MatchConditions = append(hook0(c).MatchConditions, admissionregistrationv1.MatchCondition{Name: fmt.Sprintf("c%d", i), Expression: "true"})
		}
	}, []wantErr{{field.ErrorTypeTooMany, "webhooks[0].matchConditions", ""}}},
	{"match condition without name", func(c *vwc) { hook0(c).MatchConditions[0].Name = "" },
		[]wantErr{{field.ErrorTypeRequired, "webhooks[0].matchConditions[0].name", ""}}},
	{"match condition name not qualified", func(c *vwc) {
		hook0(c).MatchConditions[0].Name = "not kube-system"
	}, []wantErr{{field.ErrorTypeInvalid, "webhooks[0].matchConditions[0].name", "name part must consist of"}}},
	{"duplicate match condition", func(c *vwc) {
		hook0(c).MatchConditions = append(hook0(c).MatchConditions, admissionregistrationv1.MatchCondition{Name: "not-kube-system", Expression: "true"})
	}, []wantErr{{field.ErrorTypeDuplicate, "webhooks[0].matchConditions[1].name", ""}}},
	{"match condition without expression", func(c *vwc) {
		hook0(c).MatchConditions[0].Expression = "  "
	}, []wantErr{{field.ErrorTypeRequired, "webhooks[0].matchConditions[0].expression", ""}}},
}

// toMutating carries a validating configuration over to a mutating one,
// webhook by webhook.
func toMutating(c *admissionregistrationv1.ValidatingWebhookConfiguration) *admissionregistrationv1.MutatingWebhookConfiguration {
	m := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: c.ObjectMeta}
	for _, h := range c.Webhooks {
		m.Webhooks = append(m.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name: h.Name, ClientConfig: h.ClientConfig, Rules: h.Rules, FailurePolicy: h.FailurePolicy,
			MatchPolicy: h.MatchPolicy, NamespaceSelector: h.NamespaceSelector, ObjectSelector: h.ObjectSelector,
			SideEffects: h.SideEffects, TimeoutSeconds: h.TimeoutSeconds, AdmissionReviewVersions: h.AdmissionReviewVersions,
			MatchConditions: h.MatchConditions, ReinvocationPolicy: ptrTo(admissionregistrationv1.NeverReinvocationPolicy),
		})
	}
	return m
}

func TestWebhookConfigurationCreate(t *testing.T) {
	for _, tt := range badWebhookCases {
		t.Run(tt.name, func(t *testing.T) {
			c := validValidatingWebhookConfiguration(t)
			tt.change(c)
			m := toMutating(c)
			checkErrs(t, ValidatingWebhookConfiguration.ValidateCreate(c), tt.want...)
			checkErrs(t, MutatingWebhookConfiguration.ValidateCreate(m), tt.want...)
		})
	}
}

// TestWebhookConfigurationValidVariants: forms upstream accepts.
func TestWebhookConfigurationValidVariants(t *testing.T) {
	for _, tt := range []webhookCase{
		{"no webhooks", func(c *vwc) { c.Webhooks = nil }, nil},
		{"no rules", func(c *vwc) { hook0(c).Rules = nil }, nil},
		{"all of everything", func(c *vwc) {
			*rule0(c) = admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{"*"},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}, Scope: ptrTo(admissionregistrationv1.AllScopes)},
			}
		}, nil},
		{"* with subresources", func(c *vwc) {
			rule0(c).Resources = []string{"*", "pods/status", "*/scale"}
		}, nil},
		{"review version besides v1", func(c *vwc) {
			hook0(c).AdmissionReviewVersions = []string{"v2", "v1"}
		}, nil},
		{"service paths", func(c *vwc) { service1(c).Path = ptrTo("/") }, nil},
		{"service path with trailing slash", func(c *vwc) {
			service1(c).Path = ptrTo("/validate/")
		}, nil},
		{"timeouts at the limits", func(c *vwc) {
			hook0(c).TimeoutSeconds = ptrTo(int32(1))
			c.Webhooks[1].TimeoutSeconds = ptrTo(int32(30))
		}, nil},
		{"64 match conditions", func(c *vwc) {
			hook0(c).MatchConditions = nil
			for i := range 64 {
				hook0(c).MatchConditions = append(hook0(c).MatchConditions, admissionregistrationv1.MatchCondition{Name: fmt.Sprintf("example.com/c%d", i), Expression: "true"})
			}
		}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := validValidatingWebhookConfiguration(t)
			tt.change(c)
			checkErrs(t, ValidatingWebhookConfiguration.ValidateCreate(c))
			checkErrs(t, MutatingWebhookConfiguration.ValidateCreate(toMutating(c)))
		})
	}
}

func TestMutatingWebhookReinvocationPolicy(t *testing.T) {
	m := validMutatingWebhookConfiguration(t)
	m.Webhooks[0].ReinvocationPolicy = ptrTo(admissionregistrationv1.IfNeededReinvocationPolicy)
	checkErrs(t, MutatingWebhookConfiguration.ValidateCreate(m))
	m.Webhooks[1].ReinvocationPolicy = ptrTo(admissionregistrationv1.ReinvocationPolicyType("Always"))
	checkErrs(t, MutatingWebhookConfiguration.ValidateCreate(m),
		wantErr{field.ErrorTypeNotSupported, "webhooks[1].reinvocationPolicy", `"IfNeeded", "Never"`})
}

func TestWebhookConfigurationUpdate(t *testing.T) {
	old := validValidatingWebhookConfiguration(t)
	c := validValidatingWebhookConfiguration(t)
	c.Webhooks[1].TimeoutSeconds = ptrTo(int32(20))
	checkErrs(t, ValidatingWebhookConfiguration.ValidateUpdate(c, old))
	// The rules of a new configuration hold for an update of a valid one.
	for _, tt := range badWebhookCases {
		t.Run(tt.name, func(t *testing.T) {
			c := validValidatingWebhookConfiguration(t)
			tt.change(c)
			checkErrs(t, ValidatingWebhookConfiguration.ValidateUpdate(c, old), tt.want...)
			checkErrs(t, MutatingWebhookConfiguration.ValidateUpdate(toMutating(c), toMutating(old)), tt.want...)
		})
	}
}

// TestWebhookConfigurationUpdateRatchet: a rule the stored configuration
// breaks (stored under v1beta1 or older rules) does not hold for its
// updates.
func TestWebhookConfigurationUpdateRatchet(t *testing.T) {
	for _, tt := range []struct {
		name  string
		stale func(c *vwc)
		want  []wantErr // what the stale configuration gives when created
	}{
		{"side effects Some", func(c *vwc) {
			hook0(c).SideEffects = ptrTo(admissionregistrationv1.SideEffectClassSome)
		}, []wantErr{{field.ErrorTypeNotSupported, "webhooks[0].sideEffects", ""}}},
		{"unknown review versions", func(c *vwc) {
			hook0(c).AdmissionReviewVersions = []string{"v2"}
		}, []wantErr{{field.ErrorTypeInvalid, "webhooks[0].admissionReviewVersions", "must include at least one of v1, v1beta1"}}},
		{"duplicate names", func(c *vwc) { c.Webhooks[1].Name = hook0(c).Name },
			[]wantErr{{field.ErrorTypeDuplicate, "webhooks[1].name", ""}}},
		{"invalid selector value", func(c *vwc) {
			c.Webhooks[1].NamespaceSelector.MatchExpressions[0].Values = []string{"not a value!"}
		}, []wantErr{{field.ErrorTypeInvalid, "webhooks[1].namespaceSelector.matchExpressions[0].values[0]", ""}}},
		{"bad match condition", func(c *vwc) {
			hook0(c).MatchConditions[0].Name = "not kube-system"
		}, []wantErr{{field.ErrorTypeInvalid, "webhooks[0].matchConditions[0].name", ""}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old := validValidatingWebhookConfiguration(t)
			tt.stale(old)
			checkErrs(t, ValidatingWebhookConfiguration.ValidateCreate(old), tt.want...)
			c := validValidatingWebhookConfiguration(t)
			tt.stale(c)
			c.Webhooks[1].TimeoutSeconds = ptrTo(int32(20))
			checkErrs(t, ValidatingWebhookConfiguration.ValidateUpdate(c, old))
			checkErrs(t, MutatingWebhookConfiguration.ValidateUpdate(toMutating(c), toMutating(old)))
			// A valid stored configuration may not be changed into one.
			checkErrs(t, ValidatingWebhookConfiguration.ValidateUpdate(c, validValidatingWebhookConfiguration(t)), tt.want...)
		})
	}
	// Match conditions that change are checked even though the stored
	// ones are bad.
	old := validValidatingWebhookConfiguration(t)
	hook0(old).MatchConditions[0].Name = "not kube-system"
	c := validValidatingWebhookConfiguration(t)
	hook0(c).MatchConditions[0].Name = "not kube-system"
	hook0(c).MatchConditions[0].Expression = "false"
	checkErrs(t, ValidatingWebhookConfiguration.ValidateUpdate(c, old),
		wantErr{field.ErrorTypeInvalid, "webhooks[0].matchConditions[0].name", ""})
	// So are those of a configuration whose webhooks come or go.
	c = validValidatingWebhookConfiguration(t)
	hook0(c).MatchConditions[0].Name = "not kube-system"
	c.Webhooks = c.Webhooks[:1]
	checkErrs(t, ValidatingWebhookConfiguration.ValidateUpdate(c, old),
		wantErr{field.ErrorTypeInvalid, "webhooks[0].matchConditions[0].name", ""})
}

// TestWebhookConfigurationGeneration: the generation grows when the
// webhooks change, not when only the metadata does.
func TestWebhookConfigurationGeneration(t *testing.T) {
	old := validValidatingWebhookConfiguration(t)
	old.Generation = 3
	c := old.DeepCopy()
	c.Labels = map[string]string{"team": "policy"}
	ValidatingWebhookConfiguration.PrepareForUpdate(c, old)
	if c.Generation != 3 {
		t.Errorf("generation after a label change %d, want 3", c.Generation)
	}
	// Defaults filled in on update are no change.
	c.Webhooks[0].TimeoutSeconds = nil
	ValidatingWebhookConfiguration.PrepareForUpdate(c, old)
	if c.Generation != 3 {
		t.Errorf("generation after defaulting %d, want 3", c.Generation)
	}
	c.Webhooks[0].TimeoutSeconds = ptrTo(int32(3))
	ValidatingWebhookConfiguration.PrepareForUpdate(c, old)
	if c.Generation != 4 {
		t.Errorf("generation after a webhook change %d, want 4", c.Generation)
	}

	mold := validMutatingWebhookConfiguration(t)
	m := mold.DeepCopy()
	m.Webhooks[1].ReinvocationPolicy = ptrTo(admissionregistrationv1.IfNeededReinvocationPolicy)
	MutatingWebhookConfiguration.PrepareForUpdate(m, mold)
	if m.Generation != 2 {
		t.Errorf("mutating generation after a webhook change %d, want 2", m.Generation)
	}
}
