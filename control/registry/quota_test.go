package registry_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/registry"
)

func podWith(name string, requests, limits corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "app", Image: "img", Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}}}}
}

func list(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func forbiddenSaying(t *testing.T, err error, want string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want a 403 saying %q", err, want)
	}
}

// TestLimitRanger: a namespace's LimitRange gives containers their
// defaults and holds them to its bounds, as Kubernetes' LimitRanger.
func TestLimitRanger(t *testing.T) {
	e := newEnv(t)
	pods := e.pods(t)
	e.create(t, e.res(t, "", "v1", "limitranges"), "default", &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
			{Type: corev1.LimitTypeContainer, Max: list("cpu", "1", "memory", "512Mi"), Min: list("cpu", "50m"),
				Default: list("cpu", "500m", "memory", "256Mi"), DefaultRequest: list("cpu", "100m", "memory", "128Mi")},
			{Type: corev1.LimitTypePersistentVolumeClaim, Max: list("storage", "1Gi")},
		}}})
	p := e.create(t, pods, "default", podWith("plain", nil, nil)).(*corev1.Pod)
	res := p.Spec.Containers[0].Resources
	if res.Requests.Cpu().String() != "100m" || res.Limits.Cpu().String() != "500m" || res.Requests.Memory().String() != "128Mi" ||
		res.Limits.Memory().String() != "256Mi" {
		t.Errorf("defaulted resources %v", res)
	}
	if got, want := p.Annotations["kubernetes.io/limit-ranger"],
		"LimitRanger plugin set: cpu, memory request for container app; cpu, memory limit for container app"; got != want {
		t.Errorf("annotation %q, want %q", got, want)
	}
	_, err := e.Create(e.ctx, pods, "default", podWith("big", list("cpu", "500m"), list("cpu", "2", "memory", "1Gi")), registry.WriteOptions{})
	forbiddenSaying(t, err, `pods "big" is forbidden: [maximum cpu usage per Container is 1, but limit is 2, maximum memory usage per Container is 512Mi, but limit is 1Gi]`)
	_, err = e.Create(e.ctx, pods, "default", podWith("tiny", list("cpu", "10m"), nil), registry.WriteOptions{})
	forbiddenSaying(t, err, "minimum cpu usage per Container is 50m, but request is 10m")
	class := ""
	_, err = e.Create(e.ctx, e.res(t, "", "v1", "persistentvolumeclaims"), "default", &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "huge"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: list("storage", "5Gi")}}}, registry.WriteOptions{})
	forbiddenSaying(t, err, "maximum storage usage per PersistentVolumeClaim is 1Gi, but request is 5Gi")

	// A default limit below the pod's own request is invalid, as
	// kube-apiserver validates what admission set.
	_, err = e.Create(e.ctx, pods, "default", podWith("low-limit", list("cpu", "800m"), nil), registry.WriteOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "must be less than or equal to cpu limit of 500m") {
		t.Errorf("a request above the default limit: %v, want 422", err)
	}

	// A LimitRange's own values out of order are refused.
	_, err = e.Create(e.ctx, e.res(t, "", "v1", "limitranges"), "default", &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Min: list("cpu", "2"), Max: list("cpu", "1")}}}},
		registry.WriteOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "min value 2 is greater than max value 1") {
		t.Errorf("min above max: %v", err)
	}
}

// TestResourceQuotaAdmission: creates are charged against the quotas
// that cover them, and refused past them with upstream's messages.
func TestResourceQuotaAdmission(t *testing.T) {
	e := newEnv(t)
	pods, quotas := e.pods(t), e.res(t, "", "v1", "resourcequotas")
	e.create(t, quotas, "default", &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "compute"},
		Spec: corev1.ResourceQuotaSpec{Hard: list("pods", "3", "requests.cpu", "1", "count/configmaps", "1")}})
	e.create(t, quotas, "default", &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "besteffort"},
		Spec: corev1.ResourceQuotaSpec{Hard: list("pods", "1"), Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}}})

	e.create(t, pods, "default", podWith("a", list("cpu", "600m"), nil))
	used := func(name string) corev1.ResourceList {
		return e.get(t, quotas, "default", name).(*corev1.ResourceQuota).Status.Used
	}
	if u := used("compute"); u.Pods().String() != "1" || u.Name("requests.cpu", resource.DecimalSI).String() != "600m" {
		t.Errorf("used after one pod: %v", u)
	}
	_, err := e.Create(e.ctx, pods, "default", podWith("b", list("cpu", "600m"), nil), registry.WriteOptions{})
	forbiddenSaying(t, err, `pods "b" is forbidden: exceeded quota: compute, requested: requests.cpu=600m, used: requests.cpu=600m, limited: requests.cpu=1`)
	// A dry run is checked, not charged.
	if _, err := e.Create(e.ctx, pods, "default", podWith("c", list("cpu", "400m"), nil), registry.WriteOptions{DryRun: true}); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if u := used("compute"); u.Name("requests.cpu", resource.DecimalSI).String() != "600m" {
		t.Errorf("a dry run was charged: %v", u)
	}
	// A quota of requests.cpu wants every container to ask for cpu.
	_, err = e.Create(e.ctx, pods, "default", podWith("d", nil, nil), registry.WriteOptions{})
	forbiddenSaying(t, err, "failed quota: compute: must specify requests.cpu for: app")

	// Object counts.
	cms := e.cms(t)
	e.create(t, cms, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "one"}})
	_, err = e.Create(e.ctx, cms, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "two"}}, registry.WriteOptions{})
	forbiddenSaying(t, err, "exceeded quota: compute, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1")
}
