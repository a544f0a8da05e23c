package registry_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/registry"
)

// TestServiceAccountAdmission: the kube-api-access volume, as upstream's
// ServiceAccount admission gives it, and who opts out.
func TestServiceAccountAdmission(t *testing.T) {
	e := newEnv(t)
	sas := e.res(t, "", "v1", "serviceaccounts")
	no := false
	e.create(t, sas, "default", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "quiet"}, AutomountServiceAccountToken: &no})
	e.create(t, sas, "default", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bot"}})

	p := newPod("plain", nil)
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "own", MountPath: registry.ServiceAccountMountPath}}}}
	p.Spec.Volumes = []corev1.Volume{{Name: "own", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	got := e.create(t, e.pods(t), "default", p).(*corev1.Pod)
	if got.Spec.ServiceAccountName != "default" || len(got.Spec.Volumes) != 2 || !strings.HasPrefix(got.Spec.Volumes[1].Name, registry.ServiceAccountVolumePrefix) {
		t.Fatalf("volumes %+v, service account %q", got.Spec.Volumes, got.Spec.ServiceAccountName)
	}
	srcs := got.Spec.Volumes[1].Projected.Sources
	if len(srcs) != 3 || srcs[0].ServiceAccountToken == nil || *srcs[0].ServiceAccountToken.ExpirationSeconds != 3607 || srcs[1].ConfigMap.Name != "kube-root-ca.crt" ||
		srcs[2].DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("sources %+v", srcs)
	}
	if m := got.Spec.Containers[0].VolumeMounts; len(m) != 1 || m[0].MountPath != registry.ServiceAccountMountPath || !m[0].ReadOnly || m[0].Name != got.Spec.Volumes[1].Name {
		t.Errorf("container mounts %+v", m)
	}
	if m := got.Spec.InitContainers[0].VolumeMounts; len(m) != 1 || m[0].Name != "own" {
		t.Errorf("a container with its own mount there: %+v", m)
	}

	for _, tc := range []struct {
		name  string
		sa    string
		optIn *bool
		mount bool
	}{
		{"opted-out", "", &no, false},
		{"of-quiet", "quiet", nil, false},
		{"of-bot", "bot", nil, true},
	} {
		p := newPod(tc.name, nil)
		p.Spec.ServiceAccountName, p.Spec.AutomountServiceAccountToken = tc.sa, tc.optIn
		got := e.create(t, e.pods(t), "default", p).(*corev1.Pod)
		if has := len(got.Spec.Volumes) == 1; has != tc.mount {
			t.Errorf("%s: volumes %+v, want the volume %v", tc.name, got.Spec.Volumes, tc.mount)
		}
	}
	p = newPod("of-ghost", nil)
	p.Spec.ServiceAccountName = "ghost"
	_, err := e.Create(e.ctx, e.pods(t), "default", p, registry.WriteOptions{})
	if err == nil || !strings.Contains(err.Error(), `error looking up service account default/ghost: serviceaccount "ghost" not found`) {
		t.Errorf("a pod of a missing service account: %v", err)
	}
}
