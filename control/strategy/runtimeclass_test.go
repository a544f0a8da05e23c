package strategy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func validRuntimeClass() *nodev1.RuntimeClass {
	return &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gvisor", ResourceVersion: "1"},
		Handler:    "runsc",
		Overhead:   &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
		Scheduling: &nodev1.Scheduling{
			NodeSelector: map[string]string{"runtime": "gvisor"},
			Tolerations:  []corev1.Toleration{{Key: "runtime", Operator: corev1.TolerationOpEqual, Value: "gvisor", Effect: corev1.TaintEffectNoSchedule}},
		},
	}
}

func TestRuntimeClassCreate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*nodev1.RuntimeClass)
		want   []wantErr
	}{
		{"valid", func(*nodev1.RuntimeClass) {}, nil},
		{"no handler", func(rc *nodev1.RuntimeClass) { rc.Handler = "" }, []wantErr{{field.ErrorTypeInvalid, "handler", "RFC 1123 label"}}},
		{"handler not a label", func(rc *nodev1.RuntimeClass) { rc.Handler = "Run.sc" }, []wantErr{{field.ErrorTypeInvalid, "handler", "RFC 1123 label"}}},
		{"name not a subdomain", func(rc *nodev1.RuntimeClass) { rc.Name = "G_visor" }, []wantErr{{field.ErrorTypeInvalid, "metadata.name", ""}}},
		{"namespace", func(rc *nodev1.RuntimeClass) { rc.Namespace = "default" }, []wantErr{{field.ErrorTypeForbidden, "metadata.namespace", ""}}},
		{"negative overhead", func(rc *nodev1.RuntimeClass) {
			rc.Overhead.PodFixed[corev1.ResourceMemory] = resource.MustParse("-1Mi")
		}, []wantErr{{field.ErrorTypeInvalid, "overhead.limits[memory]", "must be greater than or equal to 0"}}},
		{"bad node selector", func(rc *nodev1.RuntimeClass) {
			rc.Scheduling.NodeSelector = map[string]string{"bad key!": "x"}
		}, []wantErr{{field.ErrorTypeInvalid, "scheduling.nodeSelector", "name part must consist of"}}},
		{"bad toleration", func(rc *nodev1.RuntimeClass) {
			rc.Scheduling.Tolerations[0].Operator = corev1.TolerationOpExists
		}, []wantErr{{field.ErrorTypeInvalid, "scheduling.tolerations[0].operator", "value must be empty when `operator` is 'Exists'"}}},
		{"duplicate toleration", func(rc *nodev1.RuntimeClass) {
			t := rc.Scheduling.Tolerations[0]
			t.TolerationSeconds = new(int64)
			rc.Scheduling.Tolerations = append(rc.Scheduling.Tolerations, t)
		}, []wantErr{{field.ErrorTypeDuplicate, "scheduling.tolerations[1]", ""}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := validRuntimeClass()
			tt.change(rc)
			checkErrs(t, RuntimeClass.ValidateCreate(rc), tt.want...)
		})
	}
}

func TestRuntimeClassUpdate(t *testing.T) {
	old := validRuntimeClass()
	rc := validRuntimeClass()
	rc.Scheduling = nil
	checkErrs(t, RuntimeClass.ValidateUpdate(rc, old))
	rc.Handler = "runc"
	checkErrs(t, RuntimeClass.ValidateUpdate(rc, old), wantErr{field.ErrorTypeInvalid, "handler", "field is immutable"})
	rc.Handler = "Bad"
	checkErrs(t, RuntimeClass.ValidateUpdate(rc, old), wantErr{field.ErrorTypeInvalid, "handler", "RFC 1123 label"})
}

// TestRuntimeClassPrepare: a RuntimeClass has no defaults and no status;
// create and update change nothing of it.
func TestRuntimeClassPrepare(t *testing.T) {
	rc := validRuntimeClass()
	RuntimeClass.PrepareForCreate(rc)
	RuntimeClass.PrepareForUpdate(rc, validRuntimeClass())
	if rc.Handler != "runsc" || len(rc.Scheduling.Tolerations) != 1 || rc.Overhead.PodFixed.Cpu().String() != "250m" {
		t.Fatalf("prepare changed the object: %+v", rc)
	}
}
