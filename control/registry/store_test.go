package registry_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/control/registry"
)

func TestCreateGet(t *testing.T) {
	e := newEnv(t)
	pods := e.pods(t)
	out := e.create(t, pods, "default", newPod("a", map[string]string{"app": "web"})).(*corev1.Pod)
	if out.UID == "" || out.CreationTimestamp.IsZero() || out.ResourceVersion == "" {
		t.Fatalf("create did not set uid, creationTimestamp and resourceVersion: %+v", out.ObjectMeta)
	}
	if out.Namespace != "default" {
		t.Errorf("namespace = %q, want default", out.Namespace)
	}
	if out.Status.Phase != corev1.PodPending || out.Status.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("status = %s/%s, want Pending/BestEffort", out.Status.Phase, out.Status.QOSClass)
	}
	got := e.get(t, pods, "default", "a").(*corev1.Pod)
	if got.UID != out.UID || got.ResourceVersion != out.ResourceVersion {
		t.Errorf("get returned uid %s rv %s, create returned uid %s rv %s", got.UID, got.ResourceVersion, out.UID, out.ResourceVersion)
	}
	if got.Spec.Containers[0].TerminationMessagePath == "" || got.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("defaults were not applied: %+v", got.Spec)
	}
	if gen := e.create(t, e.cms(t), "default", newConfigMap("c", nil)).(*corev1.ConfigMap).Generation; gen != 0 {
		t.Errorf("generation of an object without spec = %d, want 0", gen)
	}
	if gen := e.create(t, e.deploys(t), "default", newDeployment("d", 1)).(*appsv1.Deployment).Generation; gen != 1 {
		t.Errorf("generation of a new Deployment = %d, want 1", gen)
	}
}

func TestCreateErrors(t *testing.T) {
	e := newEnv(t)
	pods := e.pods(t)
	e.create(t, pods, "default", newPod("taken", nil))
	tests := []struct {
		name  string
		ns    string
		obj   runtime.Object
		check func(error) bool
	}{
		{"already exists", "default", newPod("taken", nil), apierrors.IsAlreadyExists},
		{"namespace missing", "nowhere", newPod("p", nil), apierrors.IsNotFound},
		{"namespace mismatch", "default", func() runtime.Object { p := newPod("p", nil); p.Namespace = "other"; return p }(), apierrors.IsBadRequest},
		{"invalid", "default", func() runtime.Object { p := newPod("p", nil); p.Spec.Containers = nil; return p }(), apierrors.IsInvalid},
		{"invalid name", "default", newPod("Not_A_Name", nil), apierrors.IsInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Create(e.ctx, pods, tc.ns, tc.obj, registry.WriteOptions{})
			if !tc.check(err) {
				t.Fatalf("got %v (reason %s)", err, apierrors.ReasonForError(err))
			}
		})
	}
	t.Run("dry run stores nothing", func(t *testing.T) {
		if _, err := e.Create(e.ctx, pods, "default", newPod("dry", nil), registry.WriteOptions{DryRun: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Get(e.ctx, pods, "default", "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("get after dry run: %v, want NotFound", err)
		}
	})
	t.Run("generateName", func(t *testing.T) {
		p := newPod("", nil)
		p.GenerateName = "gen-"
		out := e.create(t, pods, "default", p)
		if n := nameOf(out); !strings.HasPrefix(n, "gen-") || len(n) != len("gen-")+5 {
			t.Fatalf("name %q", n)
		}
	})
	t.Run("terminating namespace", func(t *testing.T) {
		nsr := e.res(t, "", "v1", "namespaces")
		e.create(t, nsr, "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "going"}})
		if _, _, err := e.Delete(e.ctx, nsr, "", "going", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ns := e.get(t, nsr, "", "going").(*corev1.Namespace)
		if ns.Status.Phase != corev1.NamespaceTerminating || ns.DeletionTimestamp == nil {
			t.Fatalf("deleted namespace: phase %s deletionTimestamp %v", ns.Status.Phase, ns.DeletionTimestamp)
		}
		if _, err := e.Create(e.ctx, pods, "going", newPod("p", nil), registry.WriteOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("create in a terminating namespace: %v, want Forbidden", err)
		}
	})
}

func names(t *testing.T, list runtime.Object) []string {
	t.Helper()
	var out []string
	switch l := list.(type) {
	case *corev1.PodList:
		for _, p := range l.Items {
			out = append(out, p.Name)
		}
	case *corev1.ConfigMapList:
		for _, c := range l.Items {
			out = append(out, c.Name)
		}
	default:
		t.Fatalf("unexpected list %T", list)
	}
	return out
}

func TestListSelectors(t *testing.T) {
	e := newEnv(t)
	pods := e.pods(t)
	e.create(t, e.res(t, "", "v1", "namespaces"), "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}})
	e.create(t, pods, "default", newPod("a", map[string]string{"app": "web", "tier": "front"}))
	e.create(t, pods, "default", newPod("b", map[string]string{"app": "web", "tier": "back"}))
	e.create(t, pods, "default", newPod("c", map[string]string{"app": "db"}))
	e.create(t, pods, "other", newPod("d", map[string]string{"app": "web"}))
	if err := e.Bind(e.ctx, "default", "b", &corev1.Binding{Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		ns   string
		opts metav1.ListOptions
		want []string
	}{
		{"all in namespace", "default", metav1.ListOptions{}, []string{"a", "b", "c"}},
		{"all namespaces", "", metav1.ListOptions{}, []string{"a", "b", "c", "d"}},
		{"label equality", "default", metav1.ListOptions{LabelSelector: "app=web"}, []string{"a", "b"}},
		{"label set", "", metav1.ListOptions{LabelSelector: "app in (web,db),tier!=back"}, []string{"a", "c", "d"}},
		{"label exists", "default", metav1.ListOptions{LabelSelector: "tier"}, []string{"a", "b"}},
		{"label no match", "default", metav1.ListOptions{LabelSelector: "app=none"}, nil},
		{"field name", "default", metav1.ListOptions{FieldSelector: "metadata.name=c"}, []string{"c"}},
		{"field namespace", "", metav1.ListOptions{FieldSelector: "metadata.namespace=other"}, []string{"d"}},
		{"field nodeName", "", metav1.ListOptions{FieldSelector: "spec.nodeName=n1"}, []string{"b"}},
		{"field nodeName empty", "default", metav1.ListOptions{FieldSelector: "spec.nodeName="}, []string{"a", "c"}},
		{"field not equal", "default", metav1.ListOptions{FieldSelector: "metadata.name!=a,status.phase=Pending"}, []string{"b", "c"}},
		{"label and field", "default", metav1.ListOptions{LabelSelector: "app=web", FieldSelector: "spec.nodeName!=n1"}, []string{"a"}},
		{"resourceVersion 0", "default", metav1.ListOptions{ResourceVersion: "0"}, []string{"a", "b", "c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			list, err := e.List(e.ctx, pods, tc.ns, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(t, list); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			pl := list.(*corev1.PodList)
			if pl.ResourceVersion == "" || pl.Kind != "PodList" || pl.APIVersion != "v1" {
				t.Errorf("list meta: rv %q kind %q apiVersion %q", pl.ResourceVersion, pl.Kind, pl.APIVersion)
			}
			for _, p := range pl.Items {
				if p.ResourceVersion == "" {
					t.Errorf("item %s has no resourceVersion", p.Name)
				}
			}
		})
	}

	bad := []struct {
		name string
		opts metav1.ListOptions
	}{
		{"unsupported field", metav1.ListOptions{FieldSelector: "spec.bogus=x"}},
		{"malformed label", metav1.ListOptions{LabelSelector: "app in (web"}},
		{"negative limit", metav1.ListOptions{Limit: -1}},
		{"bad continue", metav1.ListOptions{Continue: "not-a-token"}},
		{"bad resourceVersion", metav1.ListOptions{ResourceVersion: "x"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.List(e.ctx, pods, "default", tc.opts); !apierrors.IsBadRequest(err) {
				t.Fatalf("got %v, want BadRequest", err)
			}
		})
	}
}

func TestListPaging(t *testing.T) {
	tests := []struct {
		name     string
		n        int    // configmaps created
		labelled int    // how many of them (every other one first) carry keep=yes
		selector string // label selector of the list
		limit    int64
		pages    []int // items per page
	}{
		{"uneven", 7, 0, "", 3, []int{3, 3, 1}},
		{"exact multiple", 6, 0, "", 3, []int{3, 3}},
		{"limit above count", 5, 0, "", 10, []int{5}},
		{"limit one", 3, 0, "", 1, []int{1, 1, 1}},
		{"with selector", 10, 5, "keep=yes", 2, []int{2, 2, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			cms := e.cms(t)
			var want []string
			for i := range tc.n {
				var labels map[string]string
				name := fmt.Sprintf("cm-%02d", i)
				if tc.labelled > 0 && i%2 == 0 && i/2 < tc.labelled {
					labels = map[string]string{"keep": "yes"}
				}
				if tc.selector == "" || labels != nil {
					want = append(want, name)
				}
				e.create(t, cms, "default", newConfigMap(name, labels))
			}
			var got []string
			var sizes []int
			cont := ""
			for page := 0; ; page++ {
				if page > len(tc.pages)+1 {
					t.Fatalf("too many pages: %v", sizes)
				}
				list, err := e.List(e.ctx, cms, "default", metav1.ListOptions{Limit: tc.limit, Continue: cont, LabelSelector: tc.selector})
				if err != nil {
					t.Fatalf("page %d: %v", page, err)
				}
				ns := names(t, list)
				got = append(got, ns...)
				sizes = append(sizes, len(ns))
				cont = list.(*corev1.ConfigMapList).Continue
				// Without a selector a page says how many objects remain,
				// as Kubernetes' does; with one it cannot know.
				left := list.(*corev1.ConfigMapList).RemainingItemCount
				switch {
				case cont == "" || tc.selector != "":
					if left != nil {
						t.Errorf("page %d: remainingItemCount %d, want none", page, *left)
					}
				case left == nil || *left != int64(tc.n-len(got)):
					t.Errorf("page %d: remainingItemCount %v, want %d", page, left, tc.n-len(got))
				}
				if cont == "" {
					break
				}
			}
			if !slices.Equal(sizes, tc.pages) {
				t.Errorf("page sizes %v, want %v", sizes, tc.pages)
			}
			if !slices.Equal(got, want) {
				t.Errorf("items %v, want %v", got, want)
			}
		})
	}

	t.Run("objects created between pages", func(t *testing.T) {
		// Pages after the first read the current state: every object that
		// existed at the first page and still exists is listed exactly once,
		// and an object created before the cursor is not.
		e := newEnv(t)
		cms := e.cms(t)
		for _, n := range []string{"a", "c", "e", "g"} {
			e.create(t, cms, "default", newConfigMap(n, nil))
		}
		first, err := e.List(e.ctx, cms, "default", metav1.ListOptions{Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		e.create(t, cms, "default", newConfigMap("b", nil)) // before the cursor
		e.create(t, cms, "default", newConfigMap("f", nil)) // after it
		if _, _, err := e.Delete(e.ctx, cms, "default", "e", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		rest, err := e.List(e.ctx, cms, "default", metav1.ListOptions{Limit: 10, Continue: first.(*corev1.ConfigMapList).Continue})
		if err != nil {
			t.Fatal(err)
		}
		if got := append(names(t, first), names(t, rest)...); !slices.Equal(got, []string{"a", "c", "f", "g"}) {
			t.Fatalf("pages gave %v, want [a c f g]", got)
		}
	})
}

func TestUpdateConflict(t *testing.T) {
	e := newEnv(t)
	cms := e.cms(t)
	v1 := e.create(t, cms, "default", newConfigMap("c", nil)).(*corev1.ConfigMap)

	v2 := v1.DeepCopy()
	v2.Data["k"] = "v2"
	out, err := e.Update(e.ctx, cms, "default", "c", "", v2, registry.WriteOptions{})
	if err != nil {
		t.Fatalf("update with the current resourceVersion: %v", err)
	}
	if rvOf(out) == v1.ResourceVersion {
		t.Fatalf("update did not change the resourceVersion")
	}

	stale := v1.DeepCopy() // still carries v1's resourceVersion
	stale.Data["k"] = "stale"
	if _, err := e.Update(e.ctx, cms, "default", "c", "", stale, registry.WriteOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update with a stale resourceVersion: %v, want Conflict", err)
	}
	if got := e.get(t, cms, "default", "c").(*corev1.ConfigMap).Data["k"]; got != "v2" {
		t.Fatalf("stored data %q after the refused update, want v2", got)
	}

	t.Run("name mismatch", func(t *testing.T) {
		o := v1.DeepCopy()
		o.ResourceVersion = ""
		if _, err := e.Update(e.ctx, cms, "default", "other", "", o, registry.WriteOptions{}); !apierrors.IsBadRequest(err) {
			t.Fatalf("got %v, want BadRequest", err)
		}
	})
	t.Run("missing object", func(t *testing.T) {
		o := newConfigMap("absent", nil)
		if _, err := e.Update(e.ctx, cms, "default", "absent", "", o, registry.WriteOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("got %v, want NotFound", err)
		}
	})
}

// TestUpdateUnconditionalRetries runs concurrent writers that give no
// resourceVersion: every one must succeed (the store retries its CAS), and
// none may be lost.
func TestUpdateUnconditionalRetries(t *testing.T) {
	e := newEnv(t)
	cms := e.cms(t)
	e.create(t, cms, "default", newConfigMap("c", nil))
	const writers = 10

	t.Run("update", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for i := range writers {
			wg.Go(func() {
				cm := newConfigMap("c", nil)
				cm.Data = map[string]string{"writer": strconv.Itoa(i)}
				_, err := e.Update(e.ctx, cms, "default", "c", "", cm, registry.WriteOptions{})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("unconditional update: %v", err)
			}
		}
		if w := e.get(t, cms, "default", "c").(*corev1.ConfigMap).Data["writer"]; w == "" {
			t.Errorf("no writer's data stored")
		}
	})

	t.Run("mutate counts every writer", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for range writers {
			wg.Go(func() {
				_, err := e.Mutate(e.ctx, cms, "default", "c", "", func(obj runtime.Object) error {
					cm := obj.(*corev1.ConfigMap)
					n, _ := strconv.Atoi(cm.Data["count"])
					cm.Data["count"] = strconv.Itoa(n + 1)
					return nil
				})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("mutate: %v", err)
			}
		}
		if got := e.get(t, cms, "default", "c").(*corev1.ConfigMap).Data["count"]; got != strconv.Itoa(writers) {
			t.Fatalf("count = %s after %d increments: updates were lost", got, writers)
		}
	})
}

func TestNoopUpdate(t *testing.T) {
	e := newEnv(t)
	svcs := e.res(t, "", "v1", "services")
	d := e.create(t, e.deploys(t), "default", newDeployment("d", 2)).(*appsv1.Deployment)
	np := rvOf(e.create(t, svcs, "default", newService("np", corev1.ServiceTypeNodePort)))
	// A pod without the service-account volume admission would add (an
	// update leaving it out would change the spec).
	optedOut := func() *corev1.Pod {
		p := newPod("p", nil)
		p.Spec.AutomountServiceAccountToken = new(bool)
		return p
	}
	p := rvOf(e.create(t, e.pods(t), "default", optedOut()))
	rev := e.node.KV().Revision()

	tests := []struct {
		name  string
		rv    string // the stored object's resourceVersion
		write func() (runtime.Object, error)
	}{
		{"update with the stored object", d.ResourceVersion, func() (runtime.Object, error) {
			return e.Update(e.ctx, e.deploys(t), "default", "d", "", d.DeepCopy(), registry.WriteOptions{})
		}},
		{"update without resourceVersion", d.ResourceVersion, func() (runtime.Object, error) {
			o := d.DeepCopy()
			o.ResourceVersion = ""
			return e.Update(e.ctx, e.deploys(t), "default", "d", "", o, registry.WriteOptions{})
		}},
		{"update leaving defaults out", d.ResourceVersion, func() (runtime.Object, error) {
			return e.Update(e.ctx, e.deploys(t), "default", "d", "", newDeployment("d", 2), registry.WriteOptions{})
		}},
		{"status update with the stored status", d.ResourceVersion, func() (runtime.Object, error) {
			return e.Update(e.ctx, e.deploys(t), "default", "d", "status", d.DeepCopy(), registry.WriteOptions{})
		}},
		{"service update leaving allocations out", np, func() (runtime.Object, error) {
			return e.Update(e.ctx, svcs, "default", "np", "", newService("np", corev1.ServiceTypeNodePort), registry.WriteOptions{})
		}},
		{"pod update leaving defaults and status out", p, func() (runtime.Object, error) {
			return e.Update(e.ctx, e.pods(t), "default", "p", "", optedOut(), registry.WriteOptions{})
		}},
		{"mutate changing nothing", d.ResourceVersion, func() (runtime.Object, error) {
			return e.Mutate(e.ctx, e.deploys(t), "default", "d", "", func(runtime.Object) error { return nil })
		}},
		{"merge patch setting the same value", d.ResourceVersion, func() (runtime.Object, error) {
			out, _, err := e.Patch(e.ctx, e.deploys(t), "default", "d", "", types.MergePatchType,
				[]byte(`{"spec":{"replicas":2}}`), registry.FieldValidationStrict, registry.WriteOptions{})
			return out, err
		}},
		{"scale to the same replicas", d.ResourceVersion, func() (runtime.Object, error) {
			sc, err := e.GetScale(e.ctx, e.deploys(t), "default", "d")
			if err != nil {
				return nil, err
			}
			return e.UpdateScale(e.ctx, e.deploys(t), "default", "d", sc, "", nil, registry.WriteOptions{})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.write()
			if err != nil {
				t.Fatal(err)
			}
			if rvOf(out) != tc.rv {
				t.Errorf("resourceVersion %s, want the unchanged %s", rvOf(out), tc.rv)
			}
			if r := e.node.KV().Revision(); r != rev {
				t.Errorf("store revision moved from %d to %d: a no-op wrote", rev, r)
			}
		})
	}
}

func TestGeneration(t *testing.T) {
	e := newEnv(t)
	deploys := e.deploys(t)
	e.create(t, deploys, "default", newDeployment("d", 1))

	steps := []struct {
		name   string
		write  func(t *testing.T) error
		wantGn int64
	}{
		{"label change", func(t *testing.T) error {
			_, err := e.Mutate(e.ctx, deploys, "default", "d", "", func(o runtime.Object) error {
				o.(*appsv1.Deployment).Labels = map[string]string{"x": "y"}
				return nil
			})
			return err
		}, 1},
		{"annotation patch", func(t *testing.T) error {
			_, _, err := e.Patch(e.ctx, deploys, "default", "d", "", "application/merge-patch+json",
				[]byte(`{"metadata":{"annotations":{"a":"b"}}}`), registry.FieldValidationStrict, registry.WriteOptions{})
			return err
		}, 1},
		{"spec replicas", func(t *testing.T) error {
			_, err := e.Mutate(e.ctx, deploys, "default", "d", "", func(o runtime.Object) error {
				o.(*appsv1.Deployment).Spec.Replicas = ptr(int32(3))
				return nil
			})
			return err
		}, 2},
		{"status", func(t *testing.T) error {
			_, err := e.Mutate(e.ctx, deploys, "default", "d", "status", func(o runtime.Object) error {
				o.(*appsv1.Deployment).Status.ObservedGeneration = 2
				o.(*appsv1.Deployment).Status.Replicas = 3
				return nil
			})
			return err
		}, 2},
		{"spec template patch", func(t *testing.T) error {
			_, _, err := e.Patch(e.ctx, deploys, "default", "d", "", "application/strategic-merge-patch+json",
				[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app:2"}]}}}}`), registry.FieldValidationStrict, registry.WriteOptions{})
			return err
		}, 3},
		{"scale subresource", func(t *testing.T) error {
			sc, err := e.UpdateScale(e.ctx, deploys, "default", "d", nil, "application/merge-patch+json", []byte(`{"spec":{"replicas":5}}`), registry.WriteOptions{})
			if err == nil && sc.Spec.Replicas != 5 {
				t.Errorf("scale replicas %d, want 5", sc.Spec.Replicas)
			}
			return err
		}, 4},
		{"scale subresource put", func(t *testing.T) error {
			sc, err := e.GetScale(e.ctx, deploys, "default", "d")
			if err != nil {
				return err
			}
			if sc.Spec.Replicas != 5 || sc.Status.Replicas != 3 || sc.Status.Selector != "app=d" {
				t.Errorf("scale = %+v", sc)
			}
			sc.Spec.Replicas = 1
			_, err = e.UpdateScale(e.ctx, deploys, "default", "d", sc, "", nil, registry.WriteOptions{})
			return err
		}, 5},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := st.write(t); err != nil {
				t.Fatal(err)
			}
			if g := e.get(t, deploys, "default", "d").(*appsv1.Deployment).Generation; g != st.wantGn {
				t.Fatalf("generation %d, want %d", g, st.wantGn)
			}
		})
	}

	t.Run("scale errors", func(t *testing.T) {
		sc, err := e.GetScale(e.ctx, deploys, "default", "d")
		if err != nil {
			t.Fatal(err)
		}
		stale := sc.DeepCopy()
		stale.ResourceVersion = "1"
		if _, err := e.UpdateScale(e.ctx, deploys, "default", "d", stale, "", nil, registry.WriteOptions{}); !apierrors.IsConflict(err) {
			t.Errorf("scale with a stale resourceVersion: %v, want Conflict", err)
		}
		neg := sc.DeepCopy()
		neg.Spec.Replicas = -1
		if _, err := e.UpdateScale(e.ctx, deploys, "default", "d", neg, "", nil, registry.WriteOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("negative scale: %v, want Invalid", err)
		}
		if _, err := e.GetScale(e.ctx, e.pods(t), "default", "d"); err == nil {
			t.Errorf("scale of a pod resource: no error")
		}
	})
}

func TestStatusSubresource(t *testing.T) {
	e := newEnv(t)
	deploys := e.deploys(t)
	created := e.create(t, deploys, "default", newDeployment("d", 2)).(*appsv1.Deployment)
	if created.Status.Replicas != 0 {
		t.Fatalf("create kept a client-set status")
	}

	// A status write that also changes spec and labels changes status only.
	st := created.DeepCopy()
	st.Spec.Replicas = ptr(int32(9))
	st.Labels = map[string]string{"sneaky": "yes"}
	st.Status.Replicas = 2
	st.Status.ReadyReplicas = 1
	st.Status.ObservedGeneration = 1
	out, err := e.Update(e.ctx, deploys, "default", "d", "status", st, registry.WriteOptions{})
	if err != nil {
		t.Fatalf("status update: %v", err)
	}
	got := e.get(t, deploys, "default", "d").(*appsv1.Deployment)
	if *got.Spec.Replicas != 2 || got.Labels["sneaky"] != "" {
		t.Errorf("status update changed spec.replicas to %d / labels to %v", *got.Spec.Replicas, got.Labels)
	}
	if got.Status.Replicas != 2 || got.Status.ReadyReplicas != 1 {
		t.Errorf("status update did not store the status: %+v", got.Status)
	}
	if got.ResourceVersion != rvOf(out) || got.Generation != 1 {
		t.Errorf("rv %s (update said %s), generation %d", got.ResourceVersion, rvOf(out), got.Generation)
	}

	// Its annotations may change, as in Kubernetes; its labels not (above).
	ann := got.DeepCopy()
	ann.Annotations = map[string]string{"patched": "true"}
	if _, err := e.Update(e.ctx, deploys, "default", "d", "status", ann, registry.WriteOptions{}); err != nil {
		t.Fatalf("status update: %v", err)
	}
	if got = e.get(t, deploys, "default", "d").(*appsv1.Deployment); got.Annotations["patched"] != "true" {
		t.Errorf("a Deployment's status update dropped its annotation: %v", got.Annotations)
	}

	// A main-resource write that changes status keeps the stored status.
	main := got.DeepCopy()
	main.Spec.Replicas = ptr(int32(4))
	main.Status = appsv1.DeploymentStatus{Replicas: 100}
	if _, err := e.Update(e.ctx, deploys, "default", "d", "", main, registry.WriteOptions{}); err != nil {
		t.Fatalf("update: %v", err)
	}
	got = e.get(t, deploys, "default", "d").(*appsv1.Deployment)
	if *got.Spec.Replicas != 4 {
		t.Errorf("spec.replicas %d, want 4", *got.Spec.Replicas)
	}
	if got.Status.Replicas != 2 || got.Status.ReadyReplicas != 1 {
		t.Errorf("main-resource update changed the status to %+v", got.Status)
	}

	// Resources without a status subresource: ConfigMaps have no status;
	// a pod's status written through the main resource is kept as stored.
	pods := e.pods(t)
	p := e.create(t, pods, "default", newPod("p", nil)).(*corev1.Pod)
	p.Status.Phase = corev1.PodRunning
	p.Labels = map[string]string{"l": "1"}
	if _, err := e.Update(e.ctx, pods, "default", "p", "", p, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	gp := e.get(t, pods, "default", "p").(*corev1.Pod)
	if gp.Status.Phase != corev1.PodPending || gp.Labels["l"] != "1" {
		t.Errorf("pod after main update: phase %s labels %v, want Pending and the new label", gp.Status.Phase, gp.Labels)
	}
}

func TestPatch(t *testing.T) {
	e := newEnv(t)
	cms, deploys := e.cms(t), e.deploys(t)
	e.create(t, deploys, "default", newDeployment("d", 1, "a", "b"))
	e.create(t, cms, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"keep": "1", "drop": "2"}})

	containers := func(t *testing.T) map[string]string {
		d := e.get(t, deploys, "default", "d").(*appsv1.Deployment)
		out := map[string]string{}
		for _, c := range d.Spec.Template.Spec.Containers {
			out[c.Name] = c.Image
		}
		return out
	}

	tests := []struct {
		name   string
		res    *registry.Resource
		obj    string
		pt     types.PatchType
		patch  string
		mode   registry.FieldValidation
		check  func(t *testing.T)
		errIs  func(error) bool
		warned bool
	}{
		{name: "json patch", res: cms, obj: "c", pt: "application/json-patch+json",
			patch: `[{"op":"add","path":"/metadata/labels","value":{"p":"json"}},{"op":"replace","path":"/data/keep","value":"3"}]`,
			check: func(t *testing.T) {
				c := e.get(t, cms, "default", "c").(*corev1.ConfigMap)
				if c.Labels["p"] != "json" || c.Data["keep"] != "3" {
					t.Errorf("labels %v data %v", c.Labels, c.Data)
				}
			}},
		{name: "json patch test fails", res: cms, obj: "c", pt: "application/json-patch+json",
			patch: `[{"op":"test","path":"/data/keep","value":"nope"}]`,
			errIs: func(err error) bool {
				return apierrors.ReasonForError(err) == metav1.StatusReasonInvalid || statusCode(err) == 422
			}},
		{name: "json patch malformed", res: cms, obj: "c", pt: "application/json-patch+json", patch: `{"op":"add"}`, errIs: apierrors.IsBadRequest},
		{name: "merge patch", res: cms, obj: "c", pt: "application/merge-patch+json",
			patch: `{"data":{"drop":null,"new":"4"}}`,
			check: func(t *testing.T) {
				c := e.get(t, cms, "default", "c").(*corev1.ConfigMap)
				if _, ok := c.Data["drop"]; ok || c.Data["new"] != "4" || c.Data["keep"] != "3" {
					t.Errorf("data %v", c.Data)
				}
			}},
		{name: "strategic patch merges containers by name", res: deploys, obj: "d", pt: "application/strategic-merge-patch+json",
			patch: `{"spec":{"template":{"spec":{"containers":[{"name":"b","image":"b:2"}]}}}}`,
			check: func(t *testing.T) {
				if got := containers(t); len(got) != 2 || got["a"] != "a:1" || got["b"] != "b:2" {
					t.Errorf("containers %v, want a:1 and b:2", got)
				}
			}},
		{name: "strategic patch adds a container", res: deploys, obj: "d", pt: "application/strategic-merge-patch+json",
			patch: `{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"c:1"}]}}}}`,
			check: func(t *testing.T) {
				if got := containers(t); len(got) != 3 || got["c"] != "c:1" {
					t.Errorf("containers %v, want a, b and c", got)
				}
			}},
		{name: "strategic patch deletes a container", res: deploys, obj: "d", pt: "application/strategic-merge-patch+json",
			patch: `{"spec":{"template":{"spec":{"containers":[{"name":"c","$patch":"delete"}]}}}}`,
			check: func(t *testing.T) {
				if got := containers(t); len(got) != 2 || got["c"] != "" {
					t.Errorf("containers %v, want a and b", got)
				}
			}},
		{name: "merge patch replaces the container list", res: deploys, obj: "d", pt: "application/merge-patch+json",
			patch: `{"spec":{"template":{"spec":{"containers":[{"name":"b","image":"b:3"}]}}}}`,
			check: func(t *testing.T) {
				if got := containers(t); len(got) != 1 || got["b"] != "b:3" {
					t.Errorf("containers %v, want only b:3", got)
				}
			}},
		{name: "patch to invalid", res: deploys, obj: "d", pt: "application/merge-patch+json",
			patch: `{"spec":{"replicas":-1}}`, errIs: apierrors.IsInvalid},
		{name: "unknown field strict", res: cms, obj: "c", pt: "application/merge-patch+json",
			patch: `{"bogus":1}`, mode: registry.FieldValidationStrict, errIs: apierrors.IsBadRequest},
		{name: "unknown field warn", res: cms, obj: "c", pt: "application/merge-patch+json",
			patch: `{"bogus":1,"data":{"w":"1"}}`, mode: registry.FieldValidationWarn, warned: true,
			check: func(t *testing.T) {
				if e.get(t, cms, "default", "c").(*corev1.ConfigMap).Data["w"] != "1" {
					t.Errorf("warn mode did not apply the known part")
				}
			}},
		{name: "server-side apply without apiVersion and kind", res: cms, obj: "c", pt: "application/apply-patch+yaml", patch: `{}`,
			errIs: apierrors.IsBadRequest},
		{name: "missing object", res: cms, obj: "absent", pt: "application/merge-patch+json", patch: `{}`, errIs: apierrors.IsNotFound},
		{name: "resourceVersion in patch is a precondition", res: cms, obj: "c", pt: "application/merge-patch+json",
			patch: `{"metadata":{"resourceVersion":"1"},"data":{"x":"y"}}`, errIs: apierrors.IsConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mode := tc.mode
			if mode == "" {
				mode = registry.FieldValidationStrict
			}
			_, warnings, err := e.Patch(e.ctx, tc.res, "default", tc.obj, "", tc.pt, []byte(tc.patch), mode, registry.WriteOptions{})
			if tc.errIs != nil {
				if !tc.errIs(err) {
					t.Fatalf("got %v (code %d)", err, statusCode(err))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.warned != (len(warnings) > 0) {
				t.Errorf("warnings %q", warnings)
			}
			if tc.warned && !strings.Contains(strings.Join(warnings, ";"), "bogus") {
				t.Errorf("warnings %q do not name the field", warnings)
			}
			tc.check(t)
		})
	}
}

func TestDeleteWithFinalizer(t *testing.T) {
	e := newEnv(t)
	cms := e.cms(t)
	cm := newConfigMap("c", nil)
	cm.Finalizers = []string{"example.com/hold", "example.com/second"}
	e.create(t, cms, "default", cm)

	obj, deleted, err := e.Delete(e.ctx, cms, "default", "c", metav1.DeleteOptions{})
	if err != nil || deleted {
		t.Fatalf("delete: deleted=%v err=%v, want a pending deletion", deleted, err)
	}
	got := e.get(t, cms, "default", "c").(*corev1.ConfigMap)
	if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 0 {
		t.Fatalf("deletionTimestamp %v grace %v", got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
	}
	if rvOf(obj) != got.ResourceVersion {
		t.Errorf("delete returned rv %s, stored %s", rvOf(obj), got.ResourceVersion)
	}
	ts := *got.DeletionTimestamp

	// A second delete changes nothing; updates cannot clear the mark.
	if _, deleted, err := e.Delete(e.ctx, cms, "default", "c", metav1.DeleteOptions{}); err != nil || deleted {
		t.Fatalf("second delete: deleted=%v err=%v", deleted, err)
	}
	upd, err := e.Mutate(e.ctx, cms, "default", "c", "", func(o runtime.Object) error {
		c := o.(*corev1.ConfigMap)
		c.DeletionTimestamp = nil
		c.Finalizers = []string{"example.com/second"}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if dt := upd.(*corev1.ConfigMap).DeletionTimestamp; dt == nil || !dt.Equal(&ts) {
		t.Fatalf("an update changed deletionTimestamp to %v", dt)
	}
	if _, err := e.Create(e.ctx, cms, "default", newConfigMap("c", nil), registry.WriteOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create over a deleting object: %v", err)
	}

	// Removing the last finalizer deletes the object.
	if _, err := e.Mutate(e.ctx, cms, "default", "c", "", func(o runtime.Object) error {
		o.(*corev1.ConfigMap).Finalizers = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Get(e.ctx, cms, "default", "c", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after the last finalizer went: %v, want NotFound", err)
	}

	t.Run("preconditions", func(t *testing.T) {
		c := e.create(t, cms, "default", newConfigMap("pre", nil)).(*corev1.ConfigMap)
		if _, _, err := e.Delete(e.ctx, cms, "default", "pre", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr(c.UID + "x")}}); !apierrors.IsConflict(err) {
			t.Errorf("wrong uid: %v", err)
		}
		if _, _, err := e.Delete(e.ctx, cms, "default", "pre", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr("1")}}); !apierrors.IsConflict(err) {
			t.Errorf("wrong resourceVersion: %v", err)
		}
		if _, deleted, err := e.Delete(e.ctx, cms, "default", "pre", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &c.UID, ResourceVersion: &c.ResourceVersion}}); err != nil || !deleted {
			t.Errorf("matching preconditions: deleted=%v err=%v", deleted, err)
		}
		if _, _, err := e.Delete(e.ctx, cms, "default", "pre", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("delete of a deleted object: %v", err)
		}
	})

	t.Run("propagation policy adds its finalizer", func(t *testing.T) {
		for _, tc := range []struct {
			policy    metav1.DeletionPropagation
			finalizer string
		}{{metav1.DeletePropagationForeground, "foregroundDeletion"}, {metav1.DeletePropagationOrphan, "orphan"}} {
			name := strings.ToLower(string(tc.policy))
			e.create(t, cms, "default", newConfigMap(name, nil))
			_, deleted, err := e.Delete(e.ctx, cms, "default", name, metav1.DeleteOptions{PropagationPolicy: &tc.policy})
			if err != nil || deleted {
				t.Fatalf("%s: deleted=%v err=%v", tc.policy, deleted, err)
			}
			if f := e.get(t, cms, "default", name).(*corev1.ConfigMap).Finalizers; !slices.Equal(f, []string{tc.finalizer}) {
				t.Errorf("%s: finalizers %v", tc.policy, f)
			}
		}
	})

	t.Run("delete collection", func(t *testing.T) {
		e.create(t, cms, "default", newConfigMap("dc-1", map[string]string{"dc": "y"}))
		e.create(t, cms, "default", newConfigMap("dc-2", map[string]string{"dc": "y"}))
		e.create(t, cms, "default", newConfigMap("dc-3", nil))
		list, err := e.DeleteCollection(e.ctx, cms, "default", metav1.ListOptions{LabelSelector: "dc=y"}, metav1.DeleteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := names(t, list); !slices.Equal(got, []string{"dc-1", "dc-2"}) {
			t.Errorf("deleted %v", got)
		}
		for name, gone := range map[string]bool{"dc-1": true, "dc-2": true, "dc-3": false} {
			_, err := e.Get(e.ctx, cms, "default", name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) != gone {
				t.Errorf("%s: get %v", name, err)
			}
		}
	})
}

// TestUnconditionalFinalizerRemovalRetries removes the last finalizer of a
// deleting object with a write that names no resourceVersion (as `kubectl
// patch --type=merge -p '{"metadata":{"finalizers":null}}'` does) while
// other writers change the object: like any unconditional write it must
// retry rather than fail with 409.
func TestUnconditionalFinalizerRemovalRetries(t *testing.T) {
	e := newEnv(t)
	cms := e.cms(t)
	for round := range 30 {
		name := fmt.Sprintf("c%d", round)
		cm := newConfigMap(name, nil)
		cm.Finalizers = []string{"example.com/hold"}
		e.create(t, cms, "default", cm)
		if _, _, err := e.Delete(e.ctx, cms, "default", name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		otherErrs := make(chan error, 3)
		stop := make(chan struct{})
		for i := range 3 { // writers that keep changing the object until it is gone
			wg.Go(func() {
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					_, err := e.Mutate(e.ctx, cms, "default", name, "", func(o runtime.Object) error {
						o.(*corev1.ConfigMap).Data[fmt.Sprintf("w%d", i)] = strconv.Itoa(n)
						return nil
					})
					if apierrors.IsNotFound(err) {
						return
					}
					if err != nil {
						otherErrs <- err
						return
					}
				}
			})
		}
		_, _, err := e.Patch(e.ctx, cms, "default", name, "", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`),
			registry.FieldValidationStrict, registry.WriteOptions{})
		close(stop)
		wg.Wait()
		close(otherErrs)
		for oe := range otherErrs {
			t.Errorf("round %d: concurrent writer: %v", round, oe)
		}
		if err != nil {
			t.Fatalf("round %d: removing the last finalizer without a resourceVersion: %v", round, err)
		}
		if _, err := e.Get(e.ctx, cms, "default", name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("round %d: object still there: %v", round, err)
		}
	}
}

func TestPodGracefulDeletion(t *testing.T) {
	tests := []struct {
		name      string
		node      string
		podGrace  *int64
		opts      metav1.DeleteOptions
		wantGone  bool
		wantGrace int64
	}{
		{name: "on no node", wantGone: true},
		{name: "on a node", node: "n1", wantGrace: 30},
		{name: "on a node with the pod's grace", node: "n1", podGrace: ptr(int64(7)), wantGrace: 7},
		{name: "on a node with the request's grace", node: "n1", opts: metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(5))}, wantGrace: 5},
		{name: "on a node with grace 0", node: "n1", opts: metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}, wantGone: true},
		// kube-apiserver takes a negative grace period as one second.
		{name: "on a node with negative grace", node: "n1", opts: metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(-1))}, wantGrace: 1},
	}
	e := newEnv(t)
	pods := e.pods(t)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("p%d", i)
			p := newPod(name, nil)
			p.Spec.TerminationGracePeriodSeconds = tc.podGrace
			e.create(t, pods, "default", p)
			if tc.node != "" {
				if err := e.Bind(e.ctx, "default", name, &corev1.Binding{Target: corev1.ObjectReference{Name: tc.node}}); err != nil {
					t.Fatal(err)
				}
			}
			_, deleted, err := e.Delete(e.ctx, pods, "default", name, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if deleted != tc.wantGone {
				t.Fatalf("deleted = %v, want %v", deleted, tc.wantGone)
			}
			got, err := e.Get(e.ctx, pods, "default", name, metav1.GetOptions{})
			if tc.wantGone {
				if !apierrors.IsNotFound(err) {
					t.Fatalf("get: %v, want NotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gp := got.(*corev1.Pod)
			if gp.DeletionTimestamp == nil || gp.DeletionGracePeriodSeconds == nil || *gp.DeletionGracePeriodSeconds != tc.wantGrace {
				t.Fatalf("deletionTimestamp %v grace %v, want grace %d", gp.DeletionTimestamp, gp.DeletionGracePeriodSeconds, tc.wantGrace)
			}
		})
	}

	t.Run("shorter grace replaces a longer one; zero removes", func(t *testing.T) {
		e.create(t, pods, "default", newPod("g", nil))
		if err := e.Bind(e.ctx, "default", "g", &corev1.Binding{Target: corev1.ObjectReference{Name: "n1"}}); err != nil {
			t.Fatal(err)
		}
		for _, g := range []int64{20, 40, 10} {
			if _, _, err := e.Delete(e.ctx, pods, "default", "g", metav1.DeleteOptions{GracePeriodSeconds: &g}); err != nil {
				t.Fatal(err)
			}
		}
		if g := *e.get(t, pods, "default", "g").(*corev1.Pod).DeletionGracePeriodSeconds; g != 10 {
			t.Fatalf("grace %d after deletes with 20, 40, 10; want 10", g)
		}
		_, deleted, err := e.Delete(e.ctx, pods, "default", "g", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
		if err != nil || !deleted {
			t.Fatalf("force delete: deleted=%v err=%v", deleted, err)
		}
	})

	t.Run("node reports the pod finished", func(t *testing.T) {
		e.create(t, pods, "default", newPod("f", nil))
		if err := e.Bind(e.ctx, "default", "f", &corev1.Binding{Target: corev1.ObjectReference{Name: "n1"}}); err != nil {
			t.Fatal(err)
		}
		if _, deleted, err := e.Delete(e.ctx, pods, "default", "f", metav1.DeleteOptions{}); err != nil || deleted {
			t.Fatalf("delete: deleted=%v err=%v", deleted, err)
		}
		_, err := e.Mutate(e.ctx, pods, "default", "f", "status", func(o runtime.Object) error {
			o.(*corev1.Pod).Status.Phase = corev1.PodSucceeded
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Get(e.ctx, pods, "default", "f", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("get after the pod finished: %v, want NotFound", err)
		}
	})
}

func TestBind(t *testing.T) {
	e := newEnv(t)
	pods := e.pods(t)
	p := e.create(t, pods, "default", newPod("p", nil)).(*corev1.Pod)

	bad := []struct {
		name  string
		b     corev1.Binding
		errIs func(error) bool
	}{
		{"target kind", corev1.Binding{Target: corev1.ObjectReference{Kind: "Pod", Name: "n1"}}, apierrors.IsInvalid},
		{"target name", corev1.Binding{Target: corev1.ObjectReference{Kind: "Node"}}, apierrors.IsInvalid},
		{"uid mismatch", corev1.Binding{ObjectMeta: metav1.ObjectMeta{UID: "nope"}, Target: corev1.ObjectReference{Name: "n1"}}, apierrors.IsConflict},
		{"stale resourceVersion", corev1.Binding{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1"}, Target: corev1.ObjectReference{Name: "n1"}}, apierrors.IsConflict},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if err := e.Bind(e.ctx, "default", "p", &tc.b); !tc.errIs(err) {
				t.Fatalf("got %v", err)
			}
		})
	}
	if err := e.Bind(e.ctx, "default", "absent", &corev1.Binding{Target: corev1.ObjectReference{Name: "n1"}}); !apierrors.IsNotFound(err) {
		t.Errorf("bind of a missing pod: %v", err)
	}

	if err := e.Bind(e.ctx, "default", "p", &corev1.Binding{ObjectMeta: metav1.ObjectMeta{UID: p.UID}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	got := e.get(t, pods, "default", "p").(*corev1.Pod)
	if got.Spec.NodeName != "n1" {
		t.Fatalf("nodeName %q, want n1", got.Spec.NodeName)
	}
	scheduled := false
	for _, c := range got.Status.Conditions {
		scheduled = scheduled || (c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue)
	}
	if !scheduled {
		t.Errorf("no PodScheduled=True condition: %+v", got.Status.Conditions)
	}
	if err := e.Bind(e.ctx, "default", "p", &corev1.Binding{Target: corev1.ObjectReference{Name: "n2"}}); !apierrors.IsConflict(err) {
		t.Fatalf("second bind: %v, want Conflict", err)
	}
	if n := e.get(t, pods, "default", "p").(*corev1.Pod).Spec.NodeName; n != "n1" {
		t.Fatalf("nodeName %q after the refused bind", n)
	}

	// nodeName is immutable through updates too.
	if _, err := e.Mutate(e.ctx, pods, "default", "p", "", func(o runtime.Object) error {
		o.(*corev1.Pod).Spec.NodeName = "n2"
		return nil
	}); !apierrors.IsInvalid(err) {
		t.Errorf("update of nodeName: %v, want Invalid", err)
	}

	t.Run("concurrent binds: exactly one wins", func(t *testing.T) {
		e.create(t, pods, "default", newPod("race", nil))
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				errs[i] = e.Bind(e.ctx, "default", "race", &corev1.Binding{Target: corev1.ObjectReference{Name: fmt.Sprintf("n%d", i)}})
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("binds %d and %d both succeeded", winner, i)
			case err == nil:
				winner = i
			case !apierrors.IsConflict(err):
				t.Errorf("bind %d: %v", i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("no bind succeeded: %v", errs)
		}
		if got := e.get(t, pods, "default", "race").(*corev1.Pod).Spec.NodeName; got != fmt.Sprintf("n%d", winner) {
			t.Fatalf("nodeName %q, winner n%d", got, winner)
		}
	})

	t.Run("deleting pod", func(t *testing.T) {
		pf := newPod("fin", nil)
		pf.Finalizers = []string{"example.com/hold"}
		e.create(t, pods, "default", pf)
		if _, _, err := e.Delete(e.ctx, pods, "default", "fin", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := e.Bind(e.ctx, "default", "fin", &corev1.Binding{Target: corev1.ObjectReference{Name: "n1"}}); !apierrors.IsConflict(err) {
			t.Fatalf("bind of a deleting pod: %v, want Conflict", err)
		}
	})
}

func statusCode(err error) int32 {
	if s, ok := err.(apierrors.APIStatus); ok {
		return s.Status().Code
	}
	return 0
}

// Which metadata a status write may change: a Job's (or a namespace's)
// labels and annotations, as in Kubernetes; a pod's none, since the boards
// write pods' status.
func TestStatusWriteMetadata(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		res  *registry.Resource
		ns   string
		obj  runtime.Object
		keep bool
	}{
		{"namespace", e.res(t, "", "v1", "namespaces"), "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, true},
		{"pod", e.pods(t), "default", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			created := e.create(t, tc.res, tc.ns, tc.obj)
			m, _ := meta.Accessor(created)
			_, err := e.Mutate(e.ctx, tc.res, tc.ns, m.GetName(), "status", func(o runtime.Object) error {
				om, _ := meta.Accessor(o)
				om.SetLabels(map[string]string{"app": "other"})
				om.SetAnnotations(map[string]string{"patched": "true"})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			gm, _ := meta.Accessor(e.get(t, tc.res, tc.ns, m.GetName()))
			kept := gm.GetLabels()["app"] == "other" && gm.GetAnnotations()["patched"] == "true"
			changed := gm.GetLabels()["app"] != "" || gm.GetAnnotations()["patched"] != ""
			if tc.keep && !kept || !tc.keep && changed {
				t.Errorf("labels %v, annotations %v after a status write; want them changed: %v", gm.GetLabels(), gm.GetAnnotations(), tc.keep)
			}
		})
	}
}
