package history_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
)

// A revision's data is what upstream's clients (the conformance suite,
// kubectl) match it to its owner by: the owner's JSON, its template with
// "$patch": "replace", byte for byte, as a client of the Kubernetes
// version isle reports (1.33) encodes it.
func TestRevisionMatchesItsOwner(t *testing.T) {
	e := tabletest.New(t)
	e.Namespace(t, "apps")
	dsRes := e.Res(t, "apps", "v1", "daemonsets")
	revs := e.Res(t, "apps", "v1", "controllerrevisions")
	lbl := map[string]string{"app": "agent"}
	e.MustCreate(t, dsRes, "apps", &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: lbl},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1", Ports: []corev1.ContainerPort{{ContainerPort: 9000}}}}}}}})
	var got []byte
	tabletest.Eventually(t, "a revision", func() bool {
		list, err := e.List(e.Ctx, revs, "apps", metav1.ListOptions{})
		if err != nil || len(list.(*appsv1.ControllerRevisionList).Items) != 1 {
			return false
		}
		got = list.(*appsv1.ControllerRevisionList).Items[0].Data.Raw
		return true
	})
	// A client of Kubernetes 1.33 (whose types write a zero creation
	// time as null) computes these bytes from the DaemonSet.
	want := `{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"app":"agent"}},` +
		`"spec":{"containers":[{"image":"agent:1","imagePullPolicy":"IfNotPresent","name":"agent","ports":[{"containerPort":9000,"protocol":"TCP"}],` +
		`"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst",` +
		`"restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"terminationGracePeriodSeconds":30}}}}`
	if string(got) != want {
		t.Fatalf("revision data:\n%s\nwant (a 1.33 client's patch of the DaemonSet):\n%s", got, want)
	}
}
