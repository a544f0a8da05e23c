package deployment

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/isle-cluster/isle/control/controllers/internal/ctltest"
	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/controllers/replicaset"
	"github.com/isle-cluster/isle/control/registry"
)

// The Deployment controller's tests run it alone on an in-process store:
// no pods run here, so the tests play the ReplicaSet controller's part
// and write the ReplicaSets' status (and, for Recreate, create the old
// ReplicaSets' pods and delete them).

const deployWait = 15 * time.Second

type deployEnv struct {
	*registry.Store
	t                   *testing.T
	ctx                 context.Context
	clock               *kit.TestClock
	dRes, rsRes, podRes *registry.Resource

	mu     sync.Mutex
	synced map[string]int64 // key → the latest start revision of a finished sync
}

// newDeployEnv starts a store with the namespace "default" and a
// Deployment controller on it, with an injected clock and the given
// resync interval (0: the default).
func newDeployEnv(t *testing.T, resync time.Duration) *deployEnv {
	t.Helper()
	env := ctltest.New(t, nil)
	s := env.Store
	e := &deployEnv{Store: s, t: t, ctx: t.Context(), clock: kit.NewTestClock(time.Now().Truncate(time.Second)),
		synced: map[string]int64{}}
	e.dRes = kit.MustLookup(s, appsv1.SchemeGroupVersion.WithResource("deployments"))
	e.rsRes = kit.MustLookup(s, appsv1.SchemeGroupVersion.WithResource("replicasets"))
	e.podRes = kit.MustLookup(s, corev1.SchemeGroupVersion.WithResource("pods"))

	ctrl := New(s, env.Log, nil)
	ctrl.now = e.clock.Now
	if resync > 0 {
		ctrl.resync = resync
	}
	ctrl.synced = func(key string, rev int64) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.synced[key] = max(e.synced[key], rev)
	}
	ctltest.Start(t, ctrl.Run)
	return e
}

func deployEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(deployWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %v", what, deployWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitSynced waits for a sync of the Deployment that began after
// everything written so far: its decisions saw all of it.
func (e *deployEnv) waitSynced(name string) {
	e.t.Helper()
	rev := e.Revision()
	deployEventually(e.t, "a sync of "+name+" after revision "+fmt.Sprint(rev), func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.synced[deployKey("default", name)] >= rev
	})
}

func deployTemplate(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

func (e *deployEnv) createDeployment(name string, replicas int32, mutate func(d *appsv1.Deployment)) *appsv1.Deployment {
	e.t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: deployTemplate("busybox:1"),
		},
	}
	if mutate != nil {
		mutate(d)
	}
	out, err := e.Create(e.ctx, e.dRes, "default", d, registry.WriteOptions{})
	if err != nil {
		e.t.Fatalf("create deployment: %v", err)
	}
	return out.(*appsv1.Deployment)
}

func (e *deployEnv) deployment(name string) *appsv1.Deployment {
	e.t.Helper()
	obj, err := e.Get(e.ctx, e.dRes, "default", name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("get deployment %s: %v", name, err)
	}
	return obj.(*appsv1.Deployment)
}

func (e *deployEnv) mutateDeployment(name string, change func(d *appsv1.Deployment)) {
	e.t.Helper()
	if _, err := e.Mutate(e.ctx, e.dRes, "default", name, "", func(obj runtime.Object) error {
		change(obj.(*appsv1.Deployment))
		return nil
	}); err != nil {
		e.t.Fatalf("update deployment %s: %v", name, err)
	}
}

func (e *deployEnv) setImage(name, image string) {
	e.t.Helper()
	e.mutateDeployment(name, func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = image })
}

func (e *deployEnv) scaleDeployment(name string, n int32) {
	e.t.Helper()
	if _, err := e.UpdateScale(e.ctx, e.dRes, "default", name, &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}, "", nil, registry.WriteOptions{}); err != nil {
		e.t.Fatalf("scale %s: %v", name, err)
	}
}

// replicaSets returns the ReplicaSets the Deployment controls, by revision.
func (e *deployEnv) replicaSets(d *appsv1.Deployment) []*appsv1.ReplicaSet {
	e.t.Helper()
	list, err := e.List(e.ctx, e.rsRes, "default", metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*appsv1.ReplicaSet
	for i := range list.(*appsv1.ReplicaSetList).Items {
		rs := &list.(*appsv1.ReplicaSetList).Items[i]
		if ref := metav1.GetControllerOf(rs); ref != nil && ref.UID == d.UID {
			out = append(out, rs)
		}
	}
	slices.SortFunc(out, func(a, b *appsv1.ReplicaSet) int {
		return revisionOf(a) - revisionOf(b)
	})
	return out
}

func revisionOf(rs *appsv1.ReplicaSet) int {
	var n int
	fmt.Sscan(rs.Annotations[deployRevisionAnnotation], &n)
	return n
}

func byRevision(rss []*appsv1.ReplicaSet, rev int) *appsv1.ReplicaSet {
	for _, rs := range rss {
		if revisionOf(rs) == rev {
			return rs
		}
	}
	return nil
}

// settle plays the ReplicaSet controller: every ReplicaSet of d gets its
// spec.replicas as status.replicas, available(rs) of them ready and
// available (at most all), and its generation observed. It returns the
// ReplicaSets as then stored.
func (e *deployEnv) settle(d *appsv1.Deployment, available func(rs *appsv1.ReplicaSet) int32) []*appsv1.ReplicaSet {
	e.t.Helper()
	rss := e.replicaSets(d)
	for i, rs := range rss {
		n := *rs.Spec.Replicas
		a := min(available(rs), n)
		want := appsv1.ReplicaSetStatus{Replicas: n, FullyLabeledReplicas: n, ReadyReplicas: a, AvailableReplicas: a, ObservedGeneration: rs.Generation}
		if equality.Semantic.DeepEqual(rs.Status, want) {
			continue
		}
		out, err := e.Mutate(e.ctx, e.rsRes, "default", rs.Name, "status", func(obj runtime.Object) error {
			cur := obj.(*appsv1.ReplicaSet)
			if cur.Generation != rs.Generation {
				return apierrors.NewConflict(e.rsRes.GroupResource(), rs.Name, fmt.Errorf("changed"))
			}
			cur.Status = want
			return nil
		})
		switch {
		case err == nil:
			rss[i] = out.(*appsv1.ReplicaSet)
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			// the controller got there first: next round
		default:
			e.t.Fatalf("write status of %s: %v", rs.Name, err)
		}
	}
	return rss
}

func allAvailable(rs *appsv1.ReplicaSet) int32 { return *rs.Spec.Replicas }

// rolloutStatus is what `kubectl rollout status` concludes from a
// Deployment: done, or a waiting message, or an error.
func rolloutStatus(d *appsv1.Deployment) (string, bool, error) {
	if d.Generation > d.Status.ObservedGeneration {
		return "Waiting for deployment spec update to be observed...", false, nil
	}
	if c := deployCondition(d.Status, appsv1.DeploymentProgressing); c != nil && c.Reason == "ProgressDeadlineExceeded" {
		return "", false, fmt.Errorf("deployment %q exceeded its progress deadline", d.Name)
	}
	switch {
	case d.Spec.Replicas != nil && d.Status.UpdatedReplicas < *d.Spec.Replicas:
		return fmt.Sprintf("%d out of %d new replicas have been updated", d.Status.UpdatedReplicas, *d.Spec.Replicas), false, nil
	case d.Status.Replicas > d.Status.UpdatedReplicas:
		return fmt.Sprintf("%d old replicas are pending termination", d.Status.Replicas-d.Status.UpdatedReplicas), false, nil
	case d.Status.AvailableReplicas < d.Status.UpdatedReplicas:
		return fmt.Sprintf("%d of %d updated replicas are available", d.Status.AvailableReplicas, d.Status.UpdatedReplicas), false, nil
	}
	return fmt.Sprintf("deployment %q successfully rolled out", d.Name), true, nil
}

func rolledOut(d *appsv1.Deployment) bool {
	_, done, err := rolloutStatus(d)
	return done && err == nil
}

func condition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) appsv1.DeploymentCondition {
	if c := deployCondition(d.Status, t); c != nil {
		return *c
	}
	return appsv1.DeploymentCondition{}
}

// settleUntilRolledOut plays the ReplicaSet controller with every replica
// available until the rollout is done.
func (e *deployEnv) settleUntilRolledOut(name string) *appsv1.Deployment {
	e.t.Helper()
	var d *appsv1.Deployment
	deployEventually(e.t, name+" rolled out", func() bool {
		d = e.deployment(name)
		e.settle(d, allAvailable)
		d = e.deployment(name)
		return rolledOut(d)
	})
	return d
}

func TestDeploymentCreate(t *testing.T) {
	e := newDeployEnv(t, 0)
	d := e.createDeployment("web", 3, nil)

	var rs *appsv1.ReplicaSet
	deployEventually(t, "a ReplicaSet is created", func() bool {
		rss := e.replicaSets(d)
		if len(rss) == 1 {
			rs = rss[0]
		}
		return rs != nil
	})
	hash := rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	if want := kit.TemplateHash(&d.Spec.Template, nil); hash != want {
		t.Fatalf("pod-template-hash label %q, want %q", hash, want)
	}
	if rs.Name != "web-"+hash {
		t.Errorf("ReplicaSet name %q, want web-%s", rs.Name, hash)
	}
	if rs.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] != hash || rs.Spec.Selector.MatchLabels["app"] != "web" {
		t.Errorf("selector %v", rs.Spec.Selector)
	}
	if rs.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash || rs.Spec.Template.Labels["app"] != "web" {
		t.Errorf("template labels %v", rs.Spec.Template.Labels)
	}
	ref := metav1.GetControllerOf(rs)
	if ref == nil || ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || ref.Name != "web" ||
		ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("ownerReferences %+v", rs.OwnerReferences)
	}
	if *rs.Spec.Replicas != 3 {
		t.Errorf("replicas %d, want 3", *rs.Spec.Replicas)
	}
	for k, v := range map[string]string{deployRevisionAnnotation: "1", deployDesiredReplicasAnnotation: "3", deployMaxReplicasAnnotation: "4"} {
		if rs.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, rs.Annotations[k], v)
		}
	}
	if !deployEqualIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
		t.Errorf("the ReplicaSet's template differs from the Deployment's:\n%+v\n%+v", rs.Spec.Template, d.Spec.Template)
	}

	// Before any pod is up: observed, nothing updated yet.
	deployEventually(t, "status observed", func() bool {
		d = e.deployment("web")
		return d.Status.ObservedGeneration == d.Generation && condition(d, appsv1.DeploymentProgressing).Reason != ""
	})
	if d.Annotations[deployRevisionAnnotation] != "1" {
		t.Errorf("deployment revision annotation %q, want 1", d.Annotations[deployRevisionAnnotation])
	}
	if c := condition(d, appsv1.DeploymentProgressing); c.Status != corev1.ConditionTrue || c.Reason != "NewReplicaSetCreated" {
		t.Errorf("Progressing %+v", c)
	}
	if c := condition(d, appsv1.DeploymentAvailable); c.Status != corev1.ConditionFalse || c.Reason != "MinimumReplicasUnavailable" {
		t.Errorf("Available %+v", c)
	}
	if msg, done, err := rolloutStatus(d); done || err != nil {
		t.Errorf("rollout status: %q done=%v err=%v, want waiting", msg, done, err)
	}

	// Pods come up two then three: the status follows.
	deployEventually(t, "two of three available", func() bool {
		e.settle(d, func(*appsv1.ReplicaSet) int32 { return 2 })
		d = e.deployment("web")
		return d.Status.AvailableReplicas == 2
	})
	if msg, done, _ := rolloutStatus(d); done || !strings.Contains(msg, "2 of 3 updated replicas are available") {
		t.Errorf("rollout status %q done=%v", msg, done)
	}
	if d.Status.UnavailableReplicas != 1 || d.Status.UpdatedReplicas != 3 || d.Status.Replicas != 3 {
		t.Errorf("status %+v", d.Status)
	}
	d = e.settleUntilRolledOut("web")
	st := d.Status
	if st.Replicas != 3 || st.UpdatedReplicas != 3 || st.ReadyReplicas != 3 || st.AvailableReplicas != 3 || st.UnavailableReplicas != 0 {
		t.Errorf("status %+v", st)
	}
	deployEventually(t, "conditions of a finished rollout", func() bool {
		d = e.deployment("web")
		p, a := condition(d, appsv1.DeploymentProgressing), condition(d, appsv1.DeploymentAvailable)
		return p.Status == corev1.ConditionTrue && p.Reason == "NewReplicaSetAvailable" &&
			a.Status == corev1.ConditionTrue && a.Reason == "MinimumReplicasAvailable"
	})
	if msg := condition(d, appsv1.DeploymentProgressing).Message; msg != fmt.Sprintf("ReplicaSet %q has successfully progressed.", rs.Name) {
		t.Errorf("Progressing message %q", msg)
	}

	// Steady: nothing more is written.
	rv := d.ResourceVersion
	e.waitSynced("web")
	if d = e.deployment("web"); d.ResourceVersion != rv {
		t.Errorf("a steady Deployment was written again: %+v", d.Status)
	}
	if n := len(e.replicaSets(d)); n != 1 {
		t.Errorf("%d ReplicaSets, want 1", n)
	}
}

func TestDeploymentRollingUpdate(t *testing.T) {
	e := newDeployEnv(t, 0)
	one := intstr.FromInt32(1)
	d := e.createDeployment("web", 4, func(d *appsv1.Deployment) {
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &one}}
	})
	e.settleUntilRolledOut("web")
	e.setImage("web", "busybox:2")

	// newAvailable of the new ReplicaSet's pods are up; the old ones are
	// all up. At each step the rollout comes to rest at (old, new) with
	// never more than 4+1 pods and never fewer than 4-1 available.
	steps := []struct{ newAvailable, old, new int32 }{{0, 3, 2}, {1, 2, 3}, {2, 1, 4}, {3, 0, 4}, {4, 0, 4}}
	for _, step := range steps {
		var rss []*appsv1.ReplicaSet
		deployEventually(t, fmt.Sprintf("with %d new available: old %d, new %d", step.newAvailable, step.old, step.new), func() bool {
			rss = e.settle(d, func(rs *appsv1.ReplicaSet) int32 {
				if revisionOf(rs) == 2 {
					return step.newAvailable
				}
				return *rs.Spec.Replicas
			})
			var total, available int32
			settled := true
			for _, rs := range rss {
				total += *rs.Spec.Replicas
				available += rs.Status.AvailableReplicas
				settled = settled && rs.Status.Replicas == *rs.Spec.Replicas && rs.Status.ObservedGeneration == rs.Generation
			}
			if total > 5 {
				t.Fatalf("%d pods wanted, more than replicas+maxSurge", total)
			}
			if settled && available < 3 {
				t.Fatalf("%d pods available, fewer than replicas-maxUnavailable", available)
			}
			return len(rss) == 2 && *rss[0].Spec.Replicas == step.old && *rss[1].Spec.Replicas == step.new
		})
		if revisionOf(rss[0]) != 1 || revisionOf(rss[1]) != 2 || rss[0].Name == rss[1].Name {
			t.Fatalf("ReplicaSets %s (revision %d), %s (revision %d)", rss[0].Name, revisionOf(rss[0]), rss[1].Name, revisionOf(rss[1]))
		}
		if step.newAvailable < 4 {
			e.waitSynced("web")
			if dd := e.deployment("web"); rolledOut(dd) {
				t.Fatalf("rolled out with %d of 4 new available: %+v", step.newAvailable, dd.Status)
			}
		}
	}
	deployEventually(t, "rolled out", func() bool {
		d = e.deployment("web")
		return rolledOut(d) && condition(d, appsv1.DeploymentProgressing).Reason == "NewReplicaSetAvailable"
	})
	if d.Annotations[deployRevisionAnnotation] != "2" {
		t.Errorf("deployment revision %q, want 2", d.Annotations[deployRevisionAnnotation])
	}
	if st := d.Status; st.Replicas != 4 || st.UpdatedReplicas != 4 || st.AvailableReplicas != 4 || st.UnavailableReplicas != 0 {
		t.Errorf("status %+v", st)
	}
}

// The ReplicaSet controller lags: when the Deployment has scaled the old
// ReplicaSet from 3 to 2 and the new one from 1 to 2, the old one's status
// may still count 3 available pods, because the ReplicaSet controller has
// not synced the new size yet, or because it computed the status from the
// pods it listed before deleting the surplus one. Only 2 old pods remain,
// so with 2 new ones available the old ReplicaSet may go to 1, not 0.
func TestDeploymentRollingUpdateOldStatusLags(t *testing.T) {
	for _, c := range []struct {
		name string
		// old is the status of the old ReplicaSet (now at 2 replicas) when
		// the second new pod becomes available.
		old func(rs *appsv1.ReplicaSet) appsv1.ReplicaSetStatus
	}{
		{"new size not synced yet", func(rs *appsv1.ReplicaSet) appsv1.ReplicaSetStatus {
			return rs.Status
		}},
		{"status counts the pod just deleted", func(rs *appsv1.ReplicaSet) appsv1.ReplicaSetStatus {
			return appsv1.ReplicaSetStatus{Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, ObservedGeneration: rs.Generation}
		}},
		{"status up to date", func(rs *appsv1.ReplicaSet) appsv1.ReplicaSetStatus {
			return appsv1.ReplicaSetStatus{Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, ObservedGeneration: rs.Generation}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newDeployEnv(t, 0)
			zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
			d := e.createDeployment("web", 3, func(d *appsv1.Deployment) {
				d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &zero}
			})
			e.settleUntilRolledOut("web")
			e.setImage("web", "busybox:2")

			// The first new pod becomes available: the old ReplicaSet goes
			// to 2, then the new one to 2.
			var rss []*appsv1.ReplicaSet
			deployEventually(t, "old 2, new 2", func() bool {
				rss = e.replicaSets(d)
				if len(rss) == 2 && rss[1].Status.ObservedGeneration == 0 && *rss[1].Spec.Replicas == 1 {
					e.setStatus(rss[1], appsv1.ReplicaSetStatus{Replicas: 1, FullyLabeledReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
						ObservedGeneration: rss[1].Generation})
				}
				return len(rss) == 2 && *rss[0].Spec.Replicas == 2 && *rss[1].Spec.Replicas == 2
			})
			old, cur := rss[0], rss[1]
			if old.Status.ObservedGeneration == old.Generation {
				t.Fatalf("the old ReplicaSet's status is of generation %d already", old.Generation)
			}
			e.setStatus(old, c.old(old))
			// The second new pod becomes available.
			e.setStatus(cur, appsv1.ReplicaSetStatus{Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
				ObservedGeneration: cur.Generation})
			e.waitSynced("web")
			rss = e.replicaSets(d)
			if n := *rss[0].Spec.Replicas; n != 1 {
				t.Fatalf("the old ReplicaSet scaled to %d, want 1: 2 old and 2 new pods, at least 3 must stay available", n)
			}
		})
	}
}

// setStatus writes a ReplicaSet's status, as the ReplicaSet controller.
func (e *deployEnv) setStatus(rs *appsv1.ReplicaSet, st appsv1.ReplicaSetStatus) {
	e.t.Helper()
	if _, err := e.Mutate(e.ctx, e.rsRes, "default", rs.Name, "status", func(obj runtime.Object) error {
		obj.(*appsv1.ReplicaSet).Status = st
		return nil
	}); err != nil {
		e.t.Fatalf("write status of %s: %v", rs.Name, err)
	}
}

func TestDeploymentRecreate(t *testing.T) {
	e := newDeployEnv(t, 0)
	d := e.createDeployment("web", 2, func(d *appsv1.Deployment) {
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	})
	d = e.settleUntilRolledOut("web")
	rs1 := e.replicaSets(d)[0]
	// Its two pods (the ReplicaSet controller's part).
	var pods []string
	for i := range 2 {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", rs1.Name, i), Labels: rs1.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs1, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Spec: rs1.Spec.Template.Spec,
		}
		if _, err := e.Create(e.ctx, e.podRes, "default", p, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p.Name)
	}

	e.setImage("web", "busybox:2")
	deployEventually(t, "the old ReplicaSet is scaled to 0", func() bool {
		rss := e.replicaSets(d)
		return *rss[0].Spec.Replicas == 0
	})
	if rss := e.replicaSets(d); len(rss) != 1 {
		t.Fatalf("%d ReplicaSets while the old one still has pods", len(rss))
	}
	// Its status follows (no pods counted), but the pods are still there.
	e.settle(d, allAvailable)
	e.waitSynced("web")
	if rss := e.replicaSets(d); len(rss) != 1 {
		t.Fatalf("a new ReplicaSet was created while old pods still run")
	}
	// One pod ends (Failed): it no longer counts; the other is deleted.
	if _, err := e.Mutate(e.ctx, e.podRes, "default", pods[0], "status", func(obj runtime.Object) error {
		obj.(*corev1.Pod).Status.Phase = corev1.PodFailed
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.settle(d, allAvailable) // nothing to change, but no harm
	if _, _, err := e.Delete(e.ctx, e.podRes, "default", pods[1], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var rs2 *appsv1.ReplicaSet
	deployEventually(t, "the new ReplicaSet is created at full size", func() bool {
		rss := e.replicaSets(d)
		if len(rss) == 2 {
			rs2 = rss[1]
		}
		return rs2 != nil
	})
	if *rs2.Spec.Replicas != 2 || revisionOf(rs2) != 2 {
		t.Errorf("new ReplicaSet replicas %d revision %d, want 2 and 2", *rs2.Spec.Replicas, revisionOf(rs2))
	}
	d = e.settleUntilRolledOut("web")
	if c := condition(d, appsv1.DeploymentAvailable); c.Status != corev1.ConditionTrue {
		t.Errorf("Available %+v", c)
	}
}

func TestDeploymentPaused(t *testing.T) {
	e := newDeployEnv(t, 0)
	d := e.createDeployment("web", 2, nil)
	d = e.settleUntilRolledOut("web")

	e.mutateDeployment("web", func(d *appsv1.Deployment) { d.Spec.Paused = true })
	deployEventually(t, "Progressing says paused", func() bool {
		d = e.deployment("web")
		c := condition(d, appsv1.DeploymentProgressing)
		return c.Status == corev1.ConditionUnknown && c.Reason == "DeploymentPaused"
	})
	e.setImage("web", "busybox:2")
	deployEventually(t, "the template change is observed", func() bool {
		d = e.deployment("web")
		return d.Status.ObservedGeneration == d.Generation
	})
	e.waitSynced("web")
	if rss := e.replicaSets(d); len(rss) != 1 || *rss[0].Spec.Replicas != 2 {
		t.Fatalf("a paused Deployment rolled: %d ReplicaSets", len(rss))
	}
	if d = e.deployment("web"); rolledOut(d) || d.Status.UpdatedReplicas != 0 {
		t.Errorf("paused with a new template: status %+v", d.Status)
	}

	// Scaling still applies, to the current ReplicaSet.
	e.scaleDeployment("web", 4)
	deployEventually(t, "the paused Deployment's ReplicaSet scales", func() bool {
		rss := e.settle(d, allAvailable)
		return len(rss) == 1 && *rss[0].Spec.Replicas == 4 && rss[0].Annotations[deployDesiredReplicasAnnotation] == "4"
	})

	e.mutateDeployment("web", func(d *appsv1.Deployment) { d.Spec.Paused = false })
	deployEventually(t, "resumed, the rollout starts", func() bool {
		return len(e.replicaSets(d)) == 2
	})
	d = e.settleUntilRolledOut("web")
	if rss := e.replicaSets(d); *rss[0].Spec.Replicas != 0 || *rss[1].Spec.Replicas != 4 {
		t.Errorf("after the rollout: old %d new %d", *rss[0].Spec.Replicas, *rss[1].Spec.Replicas)
	}
}

func TestDeploymentScale(t *testing.T) {
	e := newDeployEnv(t, 0)
	d := e.createDeployment("web", 3, nil)
	e.settleUntilRolledOut("web")
	for _, n := range []int32{6, 2} {
		e.scaleDeployment("web", n)
		deployEventually(t, fmt.Sprintf("scaled to %d", n), func() bool {
			d = e.deployment("web")
			rss := e.settle(d, allAvailable)
			return len(rss) == 1 && *rss[0].Spec.Replicas == n && rolledOut(e.deployment("web"))
		})
		rs := e.replicaSets(d)[0]
		surge, _ := deployResolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, n)
		if rs.Annotations[deployDesiredReplicasAnnotation] != fmt.Sprint(n) || rs.Annotations[deployMaxReplicasAnnotation] != fmt.Sprint(n+surge) {
			t.Errorf("annotations %v after scaling to %d", rs.Annotations, n)
		}
		if revisionOf(rs) != 1 {
			t.Errorf("scaling changed the revision to %d", revisionOf(rs))
		}
	}
}

// Scaling in the middle of a rollout spreads the new replicas over the
// ReplicaSets (proportionally to their sizes, here).
func TestDeploymentScaleMidRollout(t *testing.T) {
	e := newDeployEnv(t, 0)
	d := e.createDeployment("web", 10, nil) // maxSurge 25% → 3, maxUnavailable 25% → 2
	e.settleUntilRolledOut("web")
	e.setImage("web", "busybox:2")
	notNew := func(rs *appsv1.ReplicaSet) int32 {
		if revisionOf(rs) == 2 {
			return 0
		}
		return *rs.Spec.Replicas
	}
	deployEventually(t, "the rollout rests at 8 old and 5 new", func() bool {
		rss := e.settle(d, notNew)
		return len(rss) == 2 && *rss[0].Spec.Replicas == 8 && *rss[1].Spec.Replicas == 5
	})
	e.scaleDeployment("web", 20)
	deployEventually(t, "both ReplicaSets grow to 25 in all", func() bool {
		rss := e.settle(d, notNew)
		if len(rss) != 2 {
			return false
		}
		o, n := *rss[0].Spec.Replicas, *rss[1].Spec.Replicas
		return o+n == 25 && o > 8 && n > 5 && rss[0].Annotations[deployDesiredReplicasAnnotation] == "20" &&
			rss[1].Annotations[deployDesiredReplicasAnnotation] == "20"
	})
	d = e.settleUntilRolledOut("web")
	if rss := e.replicaSets(d); *rss[0].Spec.Replicas != 0 || *rss[1].Spec.Replicas != 20 {
		t.Errorf("after the rollout: old %d new %d", *rss[0].Spec.Replicas, *rss[1].Spec.Replicas)
	}
}

func TestDeploymentRevisionHistoryLimit(t *testing.T) {
	e := newDeployEnv(t, 0)
	limit := int32(1)
	d := e.createDeployment("web", 2, func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = &limit })
	e.settleUntilRolledOut("web")
	first := e.replicaSets(d)[0].Name
	for _, image := range []string{"busybox:2", "busybox:3"} {
		e.setImage("web", image)
		e.settleUntilRolledOut("web")
	}
	deployEventually(t, "the oldest ReplicaSet is deleted", func() bool {
		rss := e.settle(d, allAvailable)
		return len(rss) == 2 && revisionOf(rss[0]) == 2 && revisionOf(rss[1]) == 3
	})
	if _, err := e.Get(e.ctx, e.rsRes, "default", first, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("revision 1's ReplicaSet: %v, want gone", err)
	}
	e.waitSynced("web")
	if rss := e.replicaSets(d); len(rss) != 2 {
		t.Errorf("%d ReplicaSets, want the current one and one old one", len(rss))
	}
}

// Rollback as kubectl (1.30+) does it: the Deployment's template is
// patched back to the old ReplicaSet's; the ReplicaSet is current again,
// at a new revision.
func TestDeploymentRollback(t *testing.T) {
	e := newDeployEnv(t, 0)
	d := e.createDeployment("web", 3, func(d *appsv1.Deployment) {
		d.Annotations = map[string]string{"kubernetes.io/change-cause": "first"}
	})
	e.settleUntilRolledOut("web")
	e.mutateDeployment("web", func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = "busybox:2"
		d.Annotations["kubernetes.io/change-cause"] = "second"
	})
	d = e.settleUntilRolledOut("web")
	rss := e.replicaSets(d)
	if len(rss) != 2 || rss[0].Annotations["kubernetes.io/change-cause"] != "first" || rss[1].Annotations["kubernetes.io/change-cause"] != "second" {
		t.Fatalf("before the rollback: %d ReplicaSets, annotations %v / %v", len(rss), rss[0].Annotations, rss[len(rss)-1].Annotations)
	}
	rs1 := byRevision(rss, 1)

	// kubectl rollout undo: the previous revision's template, without its
	// hash label, and its annotations but for the controller's own.
	skip := map[string]bool{"kubectl.kubernetes.io/last-applied-configuration": true, "deployment.kubernetes.io/revision": true,
		"deployment.kubernetes.io/revision-history": true, "deployment.kubernetes.io/desired-replicas": true,
		"deployment.kubernetes.io/max-replicas": true, "deprecated.deployment.rollback.to": true}
	tmpl := rs1.Spec.Template.DeepCopy()
	delete(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	ann := map[string]string{}
	for k, v := range d.Annotations {
		if skip[k] {
			ann[k] = v
		}
	}
	for k, v := range rs1.Annotations {
		if !skip[k] {
			ann[k] = v
		}
	}
	patch, _ := json.Marshal([]map[string]any{
		{"op": "replace", "path": "/spec/template", "value": tmpl},
		{"op": "replace", "path": "/metadata/annotations", "value": ann},
	})
	if _, _, err := e.Patch(e.ctx, e.dRes, "default", "web", "", types.JSONPatchType, patch, registry.FieldValidationStrict, registry.WriteOptions{}); err != nil {
		t.Fatalf("rollback patch: %v", err)
	}

	deployEventually(t, "revision 1's ReplicaSet is current again, at revision 3", func() bool {
		rs, err := e.Get(e.ctx, e.rsRes, "default", rs1.Name, metav1.GetOptions{})
		return err == nil && revisionOf(rs.(*appsv1.ReplicaSet)) == 3
	})
	d = e.settleUntilRolledOut("web")
	rss = e.replicaSets(d)
	if len(rss) != 2 {
		t.Fatalf("%d ReplicaSets after the rollback, want the same 2", len(rss))
	}
	cur, old := byRevision(rss, 3), byRevision(rss, 2)
	if cur == nil || cur.Name != rs1.Name || old == nil || *cur.Spec.Replicas != 3 || *old.Spec.Replicas != 0 {
		t.Fatalf("after the rollback: %v", rss)
	}
	if cur.Annotations[deployRevisionHistoryAnnotation] != "1" {
		t.Errorf("revision-history %q, want 1", cur.Annotations[deployRevisionHistoryAnnotation])
	}
	if d.Annotations[deployRevisionAnnotation] != "3" || d.Annotations["kubernetes.io/change-cause"] != "first" {
		t.Errorf("deployment annotations %v", d.Annotations)
	}
	if c := condition(d, appsv1.DeploymentProgressing); c.Reason != "NewReplicaSetAvailable" || !strings.Contains(c.Message, rs1.Name) {
		t.Errorf("Progressing %+v", c)
	}
}

func TestDeploymentProgressDeadline(t *testing.T) {
	e := newDeployEnv(t, 20*time.Millisecond) // the resync looks at the injected clock often
	deadline := int32(30)
	d := e.createDeployment("web", 2, func(d *appsv1.Deployment) { d.Spec.ProgressDeadlineSeconds = &deadline })
	none := func(*appsv1.ReplicaSet) int32 { return 0 }
	deployEventually(t, "the rollout starts", func() bool {
		e.settle(d, none)
		d = e.deployment("web")
		c := condition(d, appsv1.DeploymentProgressing)
		return d.Status.Replicas == 2 && c.Status == corev1.ConditionTrue && c.LastUpdateTime.Time.Equal(e.clock.Now())
	})
	timedOut := func() bool {
		return condition(e.deployment("web"), appsv1.DeploymentProgressing).Reason == "ProgressDeadlineExceeded"
	}

	e.clock.Advance(20 * time.Second)
	e.waitSynced("web")
	if timedOut() {
		t.Fatal("timed out before the deadline")
	}
	// Progress at +20s moves the deadline to +50s.
	deployEventually(t, "progress is recorded", func() bool {
		e.settle(d, func(*appsv1.ReplicaSet) int32 { return 1 })
		c := condition(e.deployment("web"), appsv1.DeploymentProgressing)
		return c.Reason == "ReplicaSetUpdated" && c.LastUpdateTime.Time.Equal(e.clock.Now())
	})
	e.clock.Advance(20 * time.Second) // +40s
	e.waitSynced("web")
	if timedOut() {
		t.Fatal("timed out within the deadline after progress")
	}
	e.clock.Advance(11 * time.Second) // +51s
	deployEventually(t, "the progress deadline is exceeded", timedOut)
	d = e.deployment("web")
	c := condition(d, appsv1.DeploymentProgressing)
	if c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "has timed out progressing") {
		t.Errorf("Progressing %+v", c)
	}
	if _, _, err := rolloutStatus(d); err == nil || !strings.Contains(err.Error(), "exceeded its progress deadline") {
		t.Errorf("rollout status: %v, want the deadline error", err)
	}
	if a := condition(d, appsv1.DeploymentAvailable); a.Status != corev1.ConditionFalse {
		t.Errorf("Available %+v", a)
	}

	// Pods coming up after all: complete.
	d = e.settleUntilRolledOut("web")
	deployEventually(t, "Progressing recovers", func() bool {
		c := condition(e.deployment("web"), appsv1.DeploymentProgressing)
		return c.Status == corev1.ConditionTrue && c.Reason == "NewReplicaSetAvailable"
	})
}

func TestDeploymentAdoptAndRelease(t *testing.T) {
	e := newDeployEnv(t, 0)
	// An orphan ReplicaSet with the Deployment's template, made first.
	tmpl := deployTemplate("busybox:1")
	replicas := int32(2)
	orphan := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: tmpl},
	}
	if _, err := e.Create(e.ctx, e.rsRes, "default", orphan, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	d := e.createDeployment("web", 2, nil)
	deployEventually(t, "the orphan is adopted", func() bool {
		rss := e.replicaSets(d)
		return len(rss) == 1 && rss[0].Name == "orphan"
	})
	d = e.settleUntilRolledOut("web")
	rs := e.replicaSets(d)[0]
	if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != d.UID || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("ownerReferences %+v", rs.OwnerReferences)
	}
	if revisionOf(rs) != 1 {
		t.Errorf("adopted ReplicaSet revision %d, want 1", revisionOf(rs))
	}

	// Its labels changed so the Deployment no longer selects it: released,
	// and a ReplicaSet of the Deployment's own takes its place.
	if _, err := e.Mutate(e.ctx, e.rsRes, "default", "orphan", "", func(obj runtime.Object) error {
		obj.(*appsv1.ReplicaSet).Labels = map[string]string{"app": "other"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	deployEventually(t, "the ReplicaSet is released and replaced", func() bool {
		obj, err := e.Get(e.ctx, e.rsRes, "default", "orphan", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rss := e.replicaSets(d)
		return metav1.GetControllerOf(obj.(*appsv1.ReplicaSet)) == nil && len(rss) == 1 && rss[0].Name != "orphan"
	})
}

func TestDeploymentDeletingIsLeftAlone(t *testing.T) {
	e := newDeployEnv(t, 0)
	d := e.createDeployment("web", 3, func(d *appsv1.Deployment) { d.Finalizers = []string{"example.com/hold"} })
	d = e.settleUntilRolledOut("web")
	rs := e.replicaSets(d)[0]
	if _, _, err := e.Delete(e.ctx, e.dRes, "default", "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if d = e.deployment("web"); d.DeletionTimestamp == nil {
		t.Fatal("no deletionTimestamp")
	}
	if _, err := e.Mutate(e.ctx, e.rsRes, "default", rs.Name, "", func(obj runtime.Object) error {
		n := int32(7)
		obj.(*appsv1.ReplicaSet).Spec.Replicas = &n
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.waitSynced("web")
	obj, err := e.Get(e.ctx, e.rsRes, "default", rs.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := *obj.(*appsv1.ReplicaSet).Spec.Replicas; n != 7 {
		t.Errorf("the controller resized a deleting Deployment's ReplicaSet to %d", n)
	}
}

func TestDeployFenceposts(t *testing.T) {
	p := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	i := func(n int32) *intstr.IntOrString { v := intstr.FromInt32(n); return &v }
	for _, c := range []struct {
		surge, unavailable *intstr.IntOrString
		replicas           int32
		wantS, wantU       int32
	}{
		{p("25%"), p("25%"), 10, 3, 2},
		{p("25%"), p("25%"), 4, 1, 1},
		{p("25%"), p("25%"), 1, 1, 0},
		{p("0%"), p("25%"), 1, 0, 1}, // both round to 0: unavailable 1
		{i(0), i(0), 3, 0, 1},
		{i(2), i(1), 3, 2, 1},
		{p("50%"), p("100%"), 3, 2, 3},
	} {
		s, u := deployResolveFenceposts(c.surge, c.unavailable, c.replicas)
		if s != c.wantS || u != c.wantU {
			t.Errorf("surge %v unavailable %v of %d: %d, %d; want %d, %d", c.surge, c.unavailable, c.replicas, s, u, c.wantS, c.wantU)
		}
	}
}

// With the ReplicaSet controller: it runs the pods (none start
// here: the test marks them ready), the Deployment controller rolls.
func TestDeploymentWithReplicaSetController(t *testing.T) {
	env := ctltest.New(t, nil)
	s := env.Store
	e := &deployEnv{Store: s, t: t, ctx: t.Context(),
		dRes:   kit.MustLookup(s, appsv1.SchemeGroupVersion.WithResource("deployments")),
		rsRes:  kit.MustLookup(s, appsv1.SchemeGroupVersion.WithResource("replicasets")),
		podRes: kit.MustLookup(s, corev1.SchemeGroupVersion.WithResource("pods"))}
	env.Run(t, New(s, env.Log, env.Events.Recorder("deployment-controller")),
		replicaset.New(s, env.Log, env.Events.Recorder("replicaset-controller")))

	pods := func() []*corev1.Pod {
		list, err := s.List(e.ctx, e.podRes, "default", metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []*corev1.Pod
		for i := range list.(*corev1.PodList).Items {
			out = append(out, &list.(*corev1.PodList).Items[i])
		}
		return out
	}
	// The node's part: every pod starts and is ready at once.
	startPods := func() {
		for _, p := range pods() {
			if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodRunning {
				continue
			}
			_, err := s.Mutate(e.ctx, e.podRes, "default", p.Name, "status", func(obj runtime.Object) error {
				pod := obj.(*corev1.Pod)
				pod.Status.Phase = corev1.PodRunning
				pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady,
					Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Second).Truncate(time.Second))})
				return nil
			})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				t.Fatalf("start pod %s: %v", p.Name, err)
			}
		}
	}
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	d := e.createDeployment("web", 3, func(d *appsv1.Deployment) {
		d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &zero}
	})
	floor := 0 // maxUnavailable 0: once up, never fewer than 3 running pods
	rollOut := func(what string) {
		t.Helper()
		deployEventually(t, what, func() bool {
			startPods()
			running := 0
			for _, p := range pods() {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					running++
				}
			}
			if running < floor {
				t.Fatalf("%s: %d pods running, fewer than replicas-maxUnavailable", what, running)
			}
			d = e.deployment("web")
			return rolledOut(d) && len(pods()) == 3
		})
		floor = 3
	}
	rollOut("the first rollout")
	e.setImage("web", "busybox:2")
	rollOut("the second rollout")
	rss := e.replicaSets(d)
	if len(rss) != 2 || *rss[0].Spec.Replicas != 0 || *rss[1].Spec.Replicas != 3 {
		t.Fatalf("after the update: %d ReplicaSets", len(rss))
	}
	for _, p := range pods() {
		if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != rss[1].UID || p.Spec.Containers[0].Image != "busybox:2" {
			t.Errorf("pod %s of %v with image %s after the update", p.Name, ref, p.Spec.Containers[0].Image)
		}
	}

	// kubectl rollout undo (the essentials: the old template back).
	tmpl := rss[0].Spec.Template.DeepCopy()
	delete(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	patch, _ := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/template", "value": tmpl}})
	if _, _, err := e.Patch(e.ctx, e.dRes, "default", "web", "", types.JSONPatchType, patch, registry.FieldValidationStrict, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	rollOut("the rollback")
	rss = e.replicaSets(d)
	if len(rss) != 2 || rss[1].Name != byRevision(rss, 3).Name || revisionOf(rss[0]) != 2 || *rss[1].Spec.Replicas != 3 {
		t.Fatalf("after the rollback: %d ReplicaSets, revisions %d, %d", len(rss), revisionOf(rss[0]), revisionOf(rss[1]))
	}
	for _, p := range pods() {
		if p.Spec.Containers[0].Image != "busybox:1" {
			t.Errorf("pod %s runs %s after the rollback", p.Name, p.Spec.Containers[0].Image)
		}
	}
}
