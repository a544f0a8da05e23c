package quota

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func TestUsage(t *testing.T) {
	class := "local-path"
	tests := []struct {
		name string
		gr   schema.GroupResource
		obj  runtime.Object
		want string
	}{
		{"pod: requests, limits, cpu and memory as requests, init container larger", corev1.Resource("pods"), &corev1.Pod{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}},
			Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "250m", "memory", "64Mi"),
				Limits: rl("cpu", "500m", "memory", "128Mi")}}}}},
			"count/pods=1,cpu=1,limits.cpu=500m,limits.memory=128Mi,memory=64Mi,pods=1,requests.cpu=1,requests.memory=64Mi"},
		{"service of type LoadBalancer with two ports", corev1.Resource("services"), &corev1.Service{Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}, {Port: 443}}}},
			"count/services=1,services=1,services.loadbalancers=1,services.nodeports=2"},
		{"claim of a class", corev1.Resource("persistentvolumeclaims"), &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class, Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "2Gi")}}},
			"count/persistentvolumeclaims=1,local-path.storageclass.storage.k8s.io/persistentvolumeclaims=1," +
				"local-path.storageclass.storage.k8s.io/requests.storage=2Gi,persistentvolumeclaims=1,requests.storage=2Gi"},
		{"a kind of a group counts itself", schema.GroupResource{Group: "apps", Resource: "deployments"}, nil, "count/deployments.apps=1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := String(Usage(tc.gr, tc.obj)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestCoversAndCounted(t *testing.T) {
	deadline := int64(60)
	bestEffort := &corev1.Pod{Status: corev1.PodStatus{QOSClass: corev1.PodQOSBestEffort}}
	batch := &corev1.Pod{Spec: corev1.PodSpec{ActiveDeadlineSeconds: &deadline, PriorityClassName: "batch"},
		Status: corev1.PodStatus{QOSClass: corev1.PodQOSBurstable}}
	scoped := func(scopes ...corev1.ResourceQuotaScope) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Scopes: scopes}}
	}
	pods := corev1.Resource("pods")
	for _, tc := range []struct {
		name string
		q    *corev1.ResourceQuota
		obj  runtime.Object
		want bool
	}{
		{"no scope covers anything", scoped(), &corev1.ConfigMap{}, true},
		{"a scope covers pods only", scoped(corev1.ResourceQuotaScopeNotTerminating), &corev1.ConfigMap{}, false},
		{"BestEffort", scoped(corev1.ResourceQuotaScopeBestEffort), bestEffort, true},
		{"NotBestEffort", scoped(corev1.ResourceQuotaScopeNotBestEffort), bestEffort, false},
		{"Terminating", scoped(corev1.ResourceQuotaScopeTerminating), batch, true},
		{"NotTerminating", scoped(corev1.ResourceQuotaScopeNotTerminating), batch, false},
		{"PriorityClass In", &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{ScopeSelector: &corev1.ScopeSelector{
			MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{ScopeName: corev1.ResourceQuotaScopePriorityClass,
				Operator: corev1.ScopeSelectorOpIn, Values: []string{"batch", "web"}}}}}}, batch, true},
		{"PriorityClass In, another class", &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{ScopeSelector: &corev1.ScopeSelector{
			MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{ScopeName: corev1.ResourceQuotaScopePriorityClass,
				Operator: corev1.ScopeSelectorOpIn, Values: []string{"web"}}}}}}, batch, false},
	} {
		gr := pods
		if _, ok := tc.obj.(*corev1.ConfigMap); ok {
			gr = corev1.Resource("configmaps")
		}
		if got := Covers(tc.q, gr, tc.obj); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	now := time.Now()
	grace := int64(30)
	gone := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: now.Add(-time.Minute)}, DeletionGracePeriodSeconds: &grace}}
	leaving := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: now}, DeletionGracePeriodSeconds: &grace}}
	done := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	if Counted(gone, now) || Counted(done, now) || !Counted(leaving, now) || !Counted(&corev1.Secret{}, now) {
		t.Error("Counted: want a finished pod and one past its grace period out, others in")
	}
}

func TestMissingRequests(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "app", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}},
		{Name: "sidecar"},
	}}}
	if got, want := MissingRequests(pod, rl("requests.cpu", "2", "limits.memory", "1Gi")),
		"must specify limits.memory for: app,sidecar; requests.cpu for: sidecar"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := MissingRequests(pod, rl("pods", "2")); got != "" {
		t.Errorf("a quota of pods only: %q", got)
	}
}
