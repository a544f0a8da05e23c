package strategy

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// wantErr names an error a test expects: its type, its field path and,
// when set, a part of its detail.
type wantErr struct {
	typ    field.ErrorType
	field  string
	detail string
}

// checkErrs fails unless every wanted error is in errs; with want empty it
// fails unless errs is empty.
func checkErrs(t *testing.T, errs field.ErrorList, want ...wantErr) {
	t.Helper()
	if len(want) == 0 {
		if len(errs) != 0 {
			t.Fatalf("want no errors, got:\n%s", errList(errs))
		}
		return
	}
	for _, w := range want {
		found := false
		for _, e := range errs {
			if e.Type == w.typ && e.Field == w.field && strings.Contains(e.Detail, w.detail) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("want %s at %s (detail %q), got:\n%s", w.typ, w.field, w.detail, errList(errs))
		}
	}
}

func errList(errs field.ErrorList) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("  " + e.Error() + "\n")
	}
	if b.Len() == 0 {
		return "  (none)\n"
	}
	return b.String()
}

// decode reads a manifest into obj.
func decode(t *testing.T, manifest string, obj runtime.Object) {
	t.Helper()
	if err := json.Unmarshal([]byte(manifest), obj); err != nil {
		t.Fatalf("decode manifest: %v", err)
	}
}

// jsonEqual compares obj's JSON with the expected JSON, ignoring layout.
func jsonEqual(t *testing.T, obj any, want string) {
	t.Helper()
	got, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("decode got: %v", err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("decode want: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		t.Fatalf("got:\n%s\nwant:\n%s", gi, wi)
	}
}

// Valid objects, already defaulted, for the validation tests.

func objMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default", UID: "7d3a1c0e-0000-4000-8000-000000000001", ResourceVersion: "1"}
}

func validPod() *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: objMeta("web"),
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "nginx:1.25",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}}},
			Volumes: []corev1.Volume{{Name: "data"}},
		},
	}
	Default(p)
	return p
}

func validTemplate(labels map[string]string) corev1.PodTemplateSpec {
	t := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36"}}},
	}
	return t
}

func validDeployment() *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: objMeta("web"),
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: validTemplate(map[string]string{"app": "web"}),
		},
	}
	Default(d)
	return d
}

func validJob() *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: objMeta("pi"), Spec: batchv1.JobSpec{Template: validTemplate(nil)}}
	j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	Default(j)
	return j
}

func validService() *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: objMeta("web"),
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80}},
		},
	}
	Default(s)
	return s
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return string(b)
}

func ownerRef(uid string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: types.UID(uid)}
}
