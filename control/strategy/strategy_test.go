package strategy

import (
	"reflect"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestUnknownType(t *testing.T) {
	rc := &corev1.Binding{}
	for name, errs := range map[string]field.ErrorList{
		"create": ValidateCreate(rc),
		"update": ValidateUpdate(rc, rc),
		"status": ValidateStatusUpdate(rc, rc),
		"nil":    ValidateCreate(nil),
	} {
		t.Run(name, func(t *testing.T) {
			if len(errs) != 1 || errs[0].Type != field.ErrorTypeInternal {
				t.Fatalf("want one internal error, got:\n%s", errList(errs))
			}
			if name != "nil" && !strings.Contains(errs[0].Error(), errUnknownType.Error()) {
				t.Fatalf("error does not name the cause: %v", errs[0])
			}
		})
	}
}

func TestUpdateWithWrongOldType(t *testing.T) {
	p := validPod()
	for name, old := range map[string]runtime.Object{
		"other type": validDeployment(),
		"nil":        nil,
		"nil pod":    (*corev1.Pod)(nil),
	} {
		t.Run(name, func(t *testing.T) {
			errs := ValidateUpdate(p, old)
			if len(errs) != 1 || errs[0].Type != field.ErrorTypeInternal {
				t.Fatalf("want one internal error, got:\n%s", errList(errs))
			}
		})
	}
}

// TestCommonMetaOnlyAfterTypeRules: like the API server, the generic
// metadata check runs only when the type's own rules passed, so an invalid
// name is reported once.
func TestCommonMetaOnlyAfterTypeRules(t *testing.T) {
	p := validPod()
	p.Name = "a/b"
	errs := ValidateCreate(p)
	n := 0
	for _, e := range errs {
		if e.Field == "metadata.name" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("want one metadata.name error, got:\n%s", errList(errs))
	}
}

func TestDedupe(t *testing.T) {
	e := field.Invalid(field.NewPath("spec", "x"), 1, "bad")
	got := dedupe(field.ErrorList{e, field.Invalid(field.NewPath("spec", "x"), 1, "bad"), field.Required(field.NewPath("y"), "")})
	if len(got) != 2 || got[0].Field != "spec.x" || got[1].Field != "y" {
		t.Fatalf("dedupe = %v", got)
	}
}

// TestErrorMessages pins the full text of a few messages users see.
func TestErrorMessages(t *testing.T) {
	d := validDeployment()
	d.Spec.Template.Labels = map[string]string{"app": "x"}
	want := "spec.template.metadata.labels: Invalid value: {\"app\":\"x\"}: `selector` does not match template `labels`"
	if errs := ValidateCreate(d); len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("got:\n%s\nwant:\n  %s", errList(errs), want)
	}
	s := validService()
	s.Spec.Type = corev1.ServiceTypeNodePort
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	s.Spec.Ports[0].NodePort = 80
	want = "spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767"
	if errs := ValidateCreate(s); len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("got:\n%s\nwant:\n  %s", errList(errs), want)
	}
	p := validPod()
	p.Spec.Containers[0].Image = ""
	want = "spec.containers[0].image: Required value"
	if errs := ValidateCreate(p); len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("got:\n%s\nwant:\n  %s", errList(errs), want)
	}
}

// TestTableCoversServedTypes: every strategy has create and update rules.
func TestTableCoversServedTypes(t *testing.T) {
	if len(byType) != len(table) {
		t.Fatalf("table lists a type twice: %d entries, %d types", len(table), len(byType))
	}
	for _, e := range table {
		k := reflect.ValueOf(e.kind).Elem()
		if e.typ.Kind() != reflect.Pointer || k.FieldByName("create").IsNil() || k.FieldByName("update").IsNil() {
			t.Errorf("entry %v is incomplete", e.typ)
		}
	}
}

// TestConcurrentUse: the package is stateless, so parallel use is safe
// (run with -race).
func TestConcurrentUse(t *testing.T) {
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				d := &appsv1.Deployment{}
				*d = *validDeployment()
				Default(d)
				if errs := ValidateCreate(d); len(errs) != 0 {
					t.Errorf("valid deployment: %v", errs)
					return
				}
				_ = ValidateUpdate(d, validDeployment())
			}
		}()
	}
	wg.Wait()
}
