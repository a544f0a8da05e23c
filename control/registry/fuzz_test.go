package registry

import (
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// clientError fails t unless err is nil or a Status of a client error:
// input from outside never makes the server fail (5xx) or panic.
func clientError(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var st apierrors.APIStatus
	if !apierrors.IsBadRequest(err) && !asStatus(err, &st) {
		t.Fatalf("%s: %T %v, want a Status", what, err, err)
	}
	if st != nil && st.Status().Code >= http.StatusInternalServerError {
		t.Fatalf("%s: %d %v, want a client error", what, st.Status().Code, err)
	}
}

func asStatus(err error, st *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	*st = s
	return ok
}

// FuzzDecode decodes request bodies of every format and validation mode
// into a pod and a ConfigMap.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"b"},"unknown":1}`,
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers: [{name: c, image: i, bogus: 1}]\n",
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","name":"q"}}`,
		"a: &a [*a, *a]\nb: *a\n",
		`{"kind":"Pod"`,
	} {
		f.Add([]byte(seed))
	}
	table := Table()
	var targets []*Resource
	for _, r := range table {
		if r.Kind == "Pod" || r.Kind == "ConfigMap" {
			targets = append(targets, r)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, r := range targets {
			for _, format := range []Format{FormatJSON, FormatYAML} {
				for _, mode := range []FieldValidation{FieldValidationStrict, FieldValidationWarn, FieldValidationIgnore} {
					_, _, err := Decode(r, data, format, mode)
					clientError(t, "decode", err)
				}
			}
		}
	})
}

// FuzzPatch applies JSON, merge and strategic merge patches to a pod.
func FuzzPatch(f *testing.F) {
	for _, seed := range []struct {
		pt    uint8
		patch string
	}{
		{0, `[{"op":"add","path":"/metadata/labels","value":{"a":"b"}},{"op":"copy","from":"/spec","path":"/metadata/annotations/x"}]`},
		{0, `[{"op":"remove","path":"/spec/containers/-1"}]`},
		{0, `[{"op":"move","from":"/spec","path":"/spec/containers/0"}]`},
		{1, `{"metadata":{"labels":{"a":null}},"spec":{"containers":null}}`},
		{2, `{"spec":{"containers":[{"name":"c","$patch":"delete"}],"$setElementOrder/containers":[{"name":"x"}]}}`},
		{2, `{"metadata":{"$deleteFromPrimitiveList/finalizers":["a"]},"spec":{"$retainKeys":["containers"]}}`},
	} {
		f.Add(seed.pt, []byte(seed.patch))
	}
	var pods *Resource
	for _, r := range Table() {
		if r.Kind == "Pod" {
			pods = r
		}
	}
	base := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "x"}, Finalizers: []string{"a"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}}
	kinds := []types.PatchType{types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType}
	f.Fuzz(func(t *testing.T, pt uint8, patch []byte) {
		out, err := applyPatch(pods, base.DeepCopyObject(), kinds[int(pt)%len(kinds)], patch)
		clientError(t, "patch", err)
		if err == nil {
			_, _, err := Decode(pods, out, FormatJSON, FieldValidationStrict)
			clientError(t, "decode the patched pod", err)
		}
	})
}

// FuzzSelectors parses label and field selectors and matches them.
func FuzzSelectors(f *testing.F) {
	for _, seed := range [][2]string{
		{"app=x,tier!=db", "metadata.name=p"},
		{"a in (b,c),!d,e notin (f)", "spec.nodeName!=n1,status.phase=Running"},
		{"a in (", "=="},
		{"x>1,y<2", "metadata.namespace==default"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, l, fl string) {
		sel, err := ParseSelector(metav1.ListOptions{LabelSelector: l, FieldSelector: fl})
		clientError(t, "parse selectors", err)
		if err == nil {
			_ = sel.Labels.Matches(labels.Set{"app": "x"})
			_ = sel.Fields.Matches(fields.Set{"metadata.name": "p"})
		}
	})
}
