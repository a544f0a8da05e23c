package history_test

import (
	"bytes"
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
)

// upstreamPatch is how upstream's clients (the conformance suite, kubectl)
// match a revision to its owner: the owner's JSON, its template with
// "$patch": "replace", byte for byte.
func upstreamPatch(t *testing.T, ds *appsv1.DaemonSet) []byte {
	b, err := json.Marshal(ds)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	tmpl := raw["spec"].(map[string]any)["template"].(map[string]any)
	tmpl["$patch"] = "replace"
	out, err := json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRevisionMatchesItsOwner(t *testing.T) {
	e := tabletest.New(t)
	e.Namespace(t, "apps")
	dsRes := e.Res(t, "apps", "v1", "daemonsets")
	revs := e.Res(t, "apps", "v1", "controllerrevisions")
	lbl := map[string]string{"app": "agent"}
	ds := e.MustCreate(t, dsRes, "apps", &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: lbl},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1", Ports: []corev1.ContainerPort{{ContainerPort: 9000}}}}}}}}).(*appsv1.DaemonSet)
	var got []byte
	tabletest.Eventually(t, "a revision", func() bool {
		list, err := e.List(e.Ctx, revs, "apps", metav1.ListOptions{})
		if err != nil || len(list.(*appsv1.ControllerRevisionList).Items) != 1 {
			return false
		}
		got = list.(*appsv1.ControllerRevisionList).Items[0].Data.Raw
		return true
	})
	if want := upstreamPatch(t, ds); !bytes.Equal(got, want) {
		t.Fatalf("revision data:\n%s\nupstream's patch of the DaemonSet:\n%s", got, want)
	}
}
