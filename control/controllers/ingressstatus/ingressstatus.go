// Package ingressstatus is the controller of the Ingresses' status.
package ingressstatus

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/wire"
)

// IngressController is the spec.controller of the IngressClasses whose
// Ingresses every board's ingress controller (node/ingress) serves.
const IngressController = wire.IngressController

// IngressClassName is the IngressClass isle creates, as the default class.
const IngressClassName = "isle"

// DefaultIngressClass is the IngressClass a new cluster gets: isle's, and
// the default, so Ingresses naming no class are served by the boards.
func DefaultIngressClass() *networkingv1.IngressClass {
	return &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: IngressClassName,
			Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
		Spec: networkingv1.IngressClassSpec{Controller: IngressController},
	}
}

// Controller fills in status.loadBalancer of the Ingresses the boards
// serve: every board answers on its port 80, so the addresses are the
// InternalIPs of the Ready Nodes. It writes only when they change (a board
// lost or back), as Kubernetes' ingress controllers publish theirs.
type Controller struct {
	store *registry.Store
	log   *slog.Logger
}

// New returns the ingress status controller.
func New(store *registry.Store, log *slog.Logger) *Controller {
	return &Controller{store: store, log: log}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "ingress-status" }

const (
	isWorkers   = 1
	isResync    = time.Minute
	isRetryBase = 50 * time.Millisecond
	isRetryMax  = time.Minute
)

type isRun struct {
	*Controller
	ingresses, classes, nodes *registry.Resource
	queue                     *kit.Queue
}

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	r := &isRun{Controller: c,
		ingresses: kit.MustLookup(c.store, networkingv1.SchemeGroupVersion.WithResource("ingresses")),
		classes:   kit.MustLookup(c.store, networkingv1.SchemeGroupVersion.WithResource("ingressclasses")),
		nodes:     kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("nodes")),
		queue:     kit.NewQueue(isRetryBase, isRetryMax)}
	var wg sync.WaitGroup
	wg.Go(func() { r.watch(ctx) })
	kit.RunWorkers(ctx, isWorkers, r.queue, func(key string) { r.work(ctx, key) })
	wg.Wait()
}

// watch queues an Ingress when it changes, and every Ingress when a Node
// or an IngressClass does.
func (r *isRun) watch(ctx context.Context) {
	ingresses := kit.NewCache[*networkingv1.Ingress]()
	all := func() {
		for _, k := range ingresses.Keys() {
			r.queue.Add(k)
		}
	}
	loop := kit.Loop{Store: r.store, Log: r.log, Name: "ingress status controller", Resync: all, ResyncEvery: isResync}
	loop.Run(ctx,
		ingresses.Watch(r.ingresses, nil, func(typ watch.EventType, _, ing *networkingv1.Ingress) {
			if typ != watch.Deleted {
				r.queue.Add(kit.Key(ing))
			}
		}),
		kit.WatchOf(r.nodes, nil, func(watch.EventType, *corev1.Node) { all() }),
		kit.WatchOf(r.classes, nil, func(watch.EventType, *networkingv1.IngressClass) { all() }))
}

func (r *isRun) work(ctx context.Context, key string) {
	if err := r.sync(ctx, key); err != nil && ctx.Err() == nil {
		r.log.Warn("ingress status controller: reconcile failed; will retry", "ingress", key, "err", err)
		r.queue.Retry(key)
	} else {
		r.queue.Forget(key)
	}
}

func (r *isRun) sync(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	obj, err := r.store.Get(ctx, r.ingresses, ns, name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ing := obj.(*networkingv1.Ingress)
	classes, err := r.store.List(ctx, r.classes, "", metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	if !servedIngress(ing, classes.(*networkingv1.IngressClassList).Items) {
		return nil // another controller's
	}
	nodes, err := r.store.List(ctx, r.nodes, "", metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	want := boardAddresses(nodes.(*corev1.NodeList).Items)
	if equality.Semantic.DeepEqual(ing.Status.LoadBalancer.Ingress, want) {
		return nil
	}
	_, err = r.store.Mutate(ctx, r.ingresses, ns, name, "status", func(obj runtime.Object) error {
		obj.(*networkingv1.Ingress).Status.LoadBalancer.Ingress = want
		return nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// servedIngress reports whether the boards serve ing: its class (by field
// or legacy annotation) is one of isle's, or it names none and one of
// isle's classes is the default.
func servedIngress(ing *networkingv1.Ingress, classes []networkingv1.IngressClass) bool {
	name := ""
	if ing.Spec.IngressClassName != nil {
		name = *ing.Spec.IngressClassName
	} else if v, ok := ing.Annotations[annIngressClass]; ok {
		name = v
	}
	for i := range classes {
		ic := &classes[i]
		if ic.Spec.Controller != IngressController {
			continue
		}
		if name == ic.Name || name == "" && ic.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true" {
			return true
		}
	}
	return false
}

const annIngressClass = "kubernetes.io/ingress.class"

// boardAddresses are the InternalIPs of the Ready Nodes, sorted; nil if
// there are none.
func boardAddresses(nodes []corev1.Node) []networkingv1.IngressLoadBalancerIngress {
	var ips []netip.Addr
	for i := range nodes {
		n := &nodes[i]
		if kit.NodeReadyStatus(n) != corev1.ConditionTrue || n.DeletionTimestamp != nil {
			continue
		}
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP {
				ips = append(ips, ip)
				break
			}
		}
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	ips = slices.Compact(ips)
	var out []networkingv1.IngressLoadBalancerIngress
	for _, ip := range ips {
		out = append(out, networkingv1.IngressLoadBalancerIngress{IP: ip.String()})
	}
	return out
}
