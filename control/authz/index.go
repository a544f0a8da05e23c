package authz

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/registry"
)

// Index is what the authorizers read, kept in memory on every server from
// the store by watches (as kube-apiserver keeps it in informers): of the
// RBAC objects their names, rules, role references and subjects, and of pods, claims, Ingresses and
// IngressClasses only what the Node authorizer asks of them.
type Index struct {
	store *registry.Store
	log   *slog.Logger

	mu sync.RWMutex
	// RBAC.
	clusterRoles map[string]*rbacv1.ClusterRole
	crbs         map[string]*rbacv1.ClusterRoleBinding
	roles        map[string]map[string]*rbacv1.Role        // namespace → name
	rbs          map[string]map[string]*rbacv1.RoleBinding // namespace → name
	// The Node authorizer's graph.
	pods      map[string]*podRefs    // namespace/name
	nodeRefs  map[string]map[ref]int // node → what its pods reference, counted
	claims    map[string]string      // namespace/name → the bound volume's name
	ingresses map[string]ingressRefs // namespace/name
	classes   map[string]bool        // IngressClass → served by isle's ingress
	defClass  map[string]bool        // IngressClasses of isle's marked default

	// readPod and readPodsOn read a pod, and the pods bound to a node,
	// from the store as this server has applied it: the graph follows it
	// by watches, a moment behind, and is asked again there before a
	// node is refused (boundTo, refersTo). Nil without a store.
	readPod    func(namespace, name string) *corev1.Pod
	readPodsOn func(node string) []*corev1.Pod
	scanMu     sync.Mutex
	scanned    map[string]time.Time // node → its last readPodsOn (mayScan)

	synced chan struct{}
	once   sync.Once
}

// NewIndex returns an empty index; Run fills it.
func NewIndex(store *registry.Store, log *slog.Logger) *Index {
	x := &Index{store: store, log: log, clusterRoles: map[string]*rbacv1.ClusterRole{}, crbs: map[string]*rbacv1.ClusterRoleBinding{},
		roles: map[string]map[string]*rbacv1.Role{}, rbs: map[string]map[string]*rbacv1.RoleBinding{},
		pods: map[string]*podRefs{}, nodeRefs: map[string]map[ref]int{}, claims: map[string]string{},
		ingresses: map[string]ingressRefs{}, classes: map[string]bool{}, defClass: map[string]bool{}, scanned: map[string]time.Time{}, synced: make(chan struct{})}
	if store != nil {
		x.readPod, x.readPodsOn = x.storePod, x.storePodsOn
	}
	return x
}

// storeReadTimeout bounds a read of the store on a refusal's path.
const storeReadTimeout = 2 * time.Second

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

// storePod reads a pod from the store as this server has applied it
// (ResourceVersion "0": no round of the store's members); nil if it is
// not there.
func (x *Index) storePod(namespace, name string) *corev1.Pod {
	res, ok := x.store.Resources().Lookup(podsGVR)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeReadTimeout)
	defer cancel()
	obj, err := x.store.Get(ctx, res, namespace, name, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		return nil
	}
	p, _ := obj.(*corev1.Pod)
	return p
}

// storePodsOn reads the pods bound to node from the store as this server
// has applied it.
func (x *Index) storePodsOn(node string) []*corev1.Pod {
	res, ok := x.store.Resources().Lookup(podsGVR)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeReadTimeout)
	defer cancel()
	var out []*corev1.Pod
	_, err := x.store.Scan(ctx, res, "", metav1.ListOptions{ResourceVersion: "0", FieldSelector: "spec.nodeName=" + node}, func(obj runtime.Object) error {
		if p, ok := obj.(*corev1.Pod); ok {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil
	}
	return out
}

// Synced is closed once the index has read every followed resource once.
func (x *Index) Synced() <-chan struct{} { return x.synced }

// WaitSynced waits until the index has read the store once, or ctx ends.
func (x *Index) WaitSynced(ctx context.Context) error {
	select {
	case <-x.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// followed is one resource the index follows: reset forgets what it held
// of the resource, apply takes one object in (or out, when deleted).
type followed struct {
	gvr   schema.GroupVersionResource
	reset func()
	apply func(obj runtime.Object, deleted bool)
}

// Run follows the store until ctx ends.
func (x *Index) Run(ctx context.Context) {
	fs := x.followed()
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	ready.Add(len(fs))
	for _, f := range fs {
		wg.Go(func() { x.follow(ctx, f, ready.Done) })
	}
	go func() {
		ready.Wait()
		x.once.Do(func() { close(x.synced) })
	}()
	wg.Wait()
}

// follow reads f's objects, then watches them from there, and again
// whenever the watch ends; first is called after the first read.
func (x *Index) follow(ctx context.Context, f followed, first func()) {
	res, ok := x.store.Resources().Lookup(f.gvr)
	if !ok {
		x.log.Error("authz: resource not served", "resource", f.gvr.String())
		first()
		return
	}
	for ctx.Err() == nil {
		var objs []runtime.Object
		lm, err := x.store.Scan(ctx, res, "", metav1.ListOptions{ResourceVersion: "0"}, func(obj runtime.Object) error {
			objs = append(objs, obj)
			return nil
		}, registry.WithoutManagedFields())
		if err == nil {
			var events <-chan registry.WatchEvent
			events, err = x.store.Watch(ctx, res, "", metav1.ListOptions{ResourceVersion: lm.ResourceVersion}, registry.WithoutManagedFields())
			if err == nil {
				x.mu.Lock()
				f.reset()
				for _, obj := range objs {
					f.apply(obj, false)
				}
				x.mu.Unlock()
				if first != nil {
					first()
					first = nil
				}
				for ev := range events {
					if ev.Type == watch.Error || ev.Type == watch.Bookmark {
						continue
					}
					x.mu.Lock()
					f.apply(ev.Object, ev.Type == watch.Deleted)
					x.mu.Unlock()
				}
				continue
			}
		}
		if ctx.Err() == nil {
			x.log.Warn("authz: follow the store; retrying", "resource", f.gvr.String(), "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func (x *Index) followed() []followed {
	return []followed{
		{rbacv1.SchemeGroupVersion.WithResource("clusterroles"),
			func() { clear(x.clusterRoles) },
			func(obj runtime.Object, deleted bool) {
				if r, ok := obj.(*rbacv1.ClusterRole); ok {
					setOrDelete(x.clusterRoles, r.Name, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: r.Name}, Rules: r.Rules}, deleted)
				}
			}},
		{rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"),
			func() { clear(x.crbs) },
			func(obj runtime.Object, deleted bool) {
				if b, ok := obj.(*rbacv1.ClusterRoleBinding); ok {
					setOrDelete(x.crbs, b.Name, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.Name}, RoleRef: b.RoleRef, Subjects: b.Subjects}, deleted)
				}
			}},
		{rbacv1.SchemeGroupVersion.WithResource("roles"),
			func() { clear(x.roles) },
			func(obj runtime.Object, deleted bool) {
				if r, ok := obj.(*rbacv1.Role); ok {
					setOrDeleteIn(x.roles, r.Namespace, r.Name, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace}, Rules: r.Rules}, deleted)
				}
			}},
		{rbacv1.SchemeGroupVersion.WithResource("rolebindings"),
			func() { clear(x.rbs) },
			func(obj runtime.Object, deleted bool) {
				if b, ok := obj.(*rbacv1.RoleBinding); ok {
					setOrDeleteIn(x.rbs, b.Namespace, b.Name, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: b.Namespace}, RoleRef: b.RoleRef, Subjects: b.Subjects}, deleted)
				}
			}},
		{podsGVR,
			func() { clear(x.pods); clear(x.nodeRefs) },
			func(obj runtime.Object, deleted bool) {
				if p, ok := obj.(*corev1.Pod); ok {
					x.setPod(p, deleted)
				}
			}},
		{corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"),
			func() { clear(x.claims) },
			func(obj runtime.Object, deleted bool) {
				if c, ok := obj.(*corev1.PersistentVolumeClaim); ok {
					setOrDelete(x.claims, c.Namespace+"/"+c.Name, c.Spec.VolumeName, deleted)
				}
			}},
		{networkingv1.SchemeGroupVersion.WithResource("ingresses"),
			func() { clear(x.ingresses) },
			func(obj runtime.Object, deleted bool) {
				if ing, ok := obj.(*networkingv1.Ingress); ok {
					setOrDelete(x.ingresses, ing.Namespace+"/"+ing.Name, ingressRefsOf(ing), deleted)
				}
			}},
		{networkingv1.SchemeGroupVersion.WithResource("ingressclasses"),
			func() { clear(x.classes); clear(x.defClass) },
			func(obj runtime.Object, deleted bool) {
				if ic, ok := obj.(*networkingv1.IngressClass); ok {
					ours := ic.Spec.Controller == IngressController
					setOrDelete(x.classes, ic.Name, ours, deleted || !ours)
					setOrDelete(x.defClass, ic.Name, true, deleted || !ours || ic.Annotations[networkingv1.AnnotationIsDefaultIngressClass] != "true")
				}
			}},
	}
}

func setOrDelete[V any](m map[string]V, key string, v V, deleted bool) {
	if deleted {
		delete(m, key)
	} else {
		m[key] = v
	}
}

func setOrDeleteIn[V any](m map[string]map[string]V, ns, name string, v V, deleted bool) {
	inner := m[ns]
	if deleted {
		delete(inner, name)
		if len(inner) == 0 {
			delete(m, ns)
		}
		return
	}
	if inner == nil {
		inner = map[string]V{}
		m[ns] = inner
	}
	inner[name] = v
}
