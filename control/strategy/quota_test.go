package strategy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateResourceQuota(t *testing.T) {
	hard := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	tests := []struct {
		name string
		spec corev1.ResourceQuotaSpec
		want []wantErr
	}{
		{"valid", corev1.ResourceQuotaSpec{Hard: hard("pods", "10", "requests.cpu", "2", "count/deployments.apps", "3",
			"gold.storageclass.storage.k8s.io/requests.storage", "10Gi")}, nil},
		{"not a quota resource", corev1.ResourceQuotaSpec{Hard: hard("nodes", "1")},
			[]wantErr{{field.ErrorTypeInvalid, "spec.hard[nodes]", "must be a standard resource type or fully qualified"},
				{field.ErrorTypeInvalid, "spec.hard[nodes]", "must be a standard resource for quota"}}},
		{"negative", corev1.ResourceQuotaSpec{Hard: hard("requests.cpu", "-1")},
			[]wantErr{{field.ErrorTypeInvalid, "spec.hard[requests.cpu]", "must be greater than or equal to 0"}}},
		{"a count is whole", corev1.ResourceQuotaSpec{Hard: hard("pods", "1500m")},
			[]wantErr{{field.ErrorTypeInvalid, "spec.hard[pods]", "must be an integer"}}},
		{"conflicting scopes", corev1.ResourceQuotaSpec{Hard: hard("pods", "1"),
			Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort}},
			[]wantErr{{field.ErrorTypeInvalid, "spec.scopes", "conflicting scopes"}}},
		{"BestEffort limits only the count of pods", corev1.ResourceQuotaSpec{Hard: hard("requests.cpu", "1"),
			Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}},
			[]wantErr{{field.ErrorTypeInvalid, "spec.scopes", "unsupported scope applied to resource"}}},
		{"PriorityClass In without values", corev1.ResourceQuotaSpec{Hard: hard("pods", "1"), ScopeSelector: &corev1.ScopeSelector{
			MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn}}}},
			[]wantErr{{field.ErrorTypeRequired, "spec.scopeSelector.matchExpressions.values", "must be at least one value"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErrs(t, ValidateCreate(&corev1.ResourceQuota{ObjectMeta: objMeta("q"), Spec: tt.spec}), tt.want...)
		})
	}
}

func TestLimitRangeDefaults(t *testing.T) {
	lr := &corev1.LimitRange{ObjectMeta: objMeta("l"), Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
		Max: corev1.ResourceList{"memory": resource.MustParse("1Gi")}, Min: corev1.ResourceList{"cpu": resource.MustParse("100m")}}}}}
	Default(lr)
	l := lr.Spec.Limits[0]
	// The default limit is the max; the default request the default
	// limit, or else the min.
	if l.Default.Memory().String() != "1Gi" || l.DefaultRequest.Memory().String() != "1Gi" || l.DefaultRequest.Cpu().String() != "100m" {
		t.Errorf("defaults %v, default requests %v", l.Default, l.DefaultRequest)
	}
	checkErrs(t, ValidateCreate(lr))
}
