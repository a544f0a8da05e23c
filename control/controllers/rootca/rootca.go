// Package rootca is the root-CA publisher (kube-controller-manager's
// root-ca-cert-publisher).
package rootca

import (
	"bytes"
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// ConfigMap is the ConfigMap every namespace holds with the cluster
// CA's certificate under the key "ca.crt", as kube-controller-manager's
// root-ca-cert-publisher keeps it: projected service-account volumes and
// in-cluster clients read it to trust the API server.
const ConfigMap = "kube-root-ca.crt"

// rootCADescription is the annotation upstream's publisher sets.
const rootCADescription = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. " +
	"No other usage is guaranteed across distributions of Kubernetes clusters."

// Controller puts ConfigMap into every namespace that is not
// terminating, and puts it back when it is deleted or its data changed.
type Controller struct {
	store  *registry.Store
	log    *slog.Logger
	bundle func() []byte
}

// New returns the publisher of the CA certificates bundle returns (the
// cluster CA's, and while it is replaced the new one's too); without it
// the publisher does not run.
func New(store *registry.Store, log *slog.Logger, bundle func() []byte) *Controller {
	return &Controller{store: store, log: log, bundle: bundle}
}

// bundleEvery is how often the publisher looks for a new bundle (the CA
// replaced), which it then publishes in every namespace.
const bundleEvery = 2 * time.Second

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "root-ca-cert-publisher" }

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	if c.bundle == nil || len(c.bundle()) == 0 {
		return
	}
	nsRes := kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("namespaces"))
	cmRes := kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("configmaps"))
	go c.republish(ctx, nsRes)
	loop := kit.Loop{Store: c.store, Log: c.log, Name: "root-ca-cert-publisher"}
	loop.Run(ctx,
		kit.WatchOf(nsRes, nil, func(typ watch.EventType, ns *corev1.Namespace) {
			if typ != watch.Deleted && ns.DeletionTimestamp == nil {
				c.sync(ctx, ns.Name)
			}
		}),
		kit.Watch{Res: cmRes, ChangesOnly: true, Handle: func(ev registry.WatchEvent) {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && cm.Name == ConfigMap {
				c.sync(ctx, cm.Namespace)
			}
		}})
}

// republish publishes a new bundle in every namespace, looking every
// bundleEvery until ctx ends.
func (c *Controller) republish(ctx context.Context, nsRes *registry.Resource) {
	last := c.bundle()
	t := time.NewTicker(bundleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b := c.bundle()
		if bytes.Equal(b, last) {
			continue
		}
		list, err := c.store.List(ctx, nsRes, "", metav1.ListOptions{})
		if err != nil {
			c.log.Warn("root-ca-cert-publisher: list namespaces; trying again", "err", err)
			continue
		}
		for _, ns := range list.(*corev1.NamespaceList).Items {
			c.sync(ctx, ns.Name)
		}
		last = b
		c.log.Info("root-ca-cert-publisher: a new CA bundle published", "namespaces", len(list.(*corev1.NamespaceList).Items))
	}
}

// sync makes namespace ns's ConfigMap hold the CA's certificate.
func (c *Controller) sync(ctx context.Context, ns string) {
	nsRes := kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("namespaces"))
	cmRes := kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("configmaps"))
	if obj, err := c.store.Get(ctx, nsRes, "", ns, metav1.GetOptions{ResourceVersion: "0"}); err != nil ||
		obj.(*corev1.Namespace).DeletionTimestamp != nil {
		return // gone or going: nothing new may be created in it
	}
	want := map[string]string{"ca.crt": string(c.bundle())}
	obj, err := c.store.Get(ctx, cmRes, ns, ConfigMap, metav1.GetOptions{ResourceVersion: "0"})
	switch {
	case apierrors.IsNotFound(err):
		_, err = c.store.Create(ctx, cmRes, ns, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ConfigMap, Namespace: ns,
				Annotations: map[string]string{"kubernetes.io/description": rootCADescription}},
			Data: want,
		}, registry.WriteOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	case err == nil:
		cm := obj.(*corev1.ConfigMap)
		if len(cm.Data) == 1 && cm.Data["ca.crt"] == want["ca.crt"] && len(cm.BinaryData) == 0 {
			return
		}
		_, err = c.store.Mutate(ctx, cmRes, ns, ConfigMap, "", func(o runtime.Object) error {
			cm := o.(*corev1.ConfigMap)
			cm.Data, cm.BinaryData = want, nil
			return nil
		})
	}
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		c.log.Warn("root-ca-cert-publisher: publish", "namespace", ns, "err", err)
	}
}
