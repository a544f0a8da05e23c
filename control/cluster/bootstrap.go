package cluster

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/isle-cluster/isle/control/controllers/ingressstatus"
	"github.com/isle-cluster/isle/control/controllers/volumes"
	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/strategy"
	"github.com/isle-cluster/isle/raft/kv"
)

// systemNamespaces exist in every cluster from the start.
var systemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// Where the cluster CA is kept in the store: the certificate, and the key
// sealed with the cluster token's secret (pki.Seal).
const (
	caCertKey      = "/isle/ca/cert"
	caKeySealedKey = "/isle/ca/key.sealed"
)

// bootstrapObjects creates, on the leader, what every cluster has from the
// start: the CA in the store, the system namespaces, the kubernetes
// Service, the cluster DNS's Service (kube-system/kube-dns at clusterDNS),
// the default IngressClass (isle), the system PriorityClasses and the
// default StorageClass (local-path). It is idempotent and
// retries until it has succeeded or ctx ends.
func bootstrapObjects(ctx context.Context, store *registry.Store, id Identity, clusterDNS netip.Addr, log *slog.Logger) {
	for {
		err := ensureCA(ctx, store, id)
		if err == nil {
			err = ensureObjects(ctx, store, clusterDNS)
		}
		if err == nil {
			return
		}
		log.Warn("cluster: creating the initial objects failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// ensureCA stores the CA certificate and its sealed key, unless present.
func ensureCA(ctx context.Context, store *registry.Store, id Identity) error {
	sealed, err := pki.Seal(id.CA.Signer().KeyPEM, id.secret(), pki.InfoCAKey)
	if err != nil {
		return err
	}
	if _, found, _ := store.Node().KV().Get(caCertKey); found {
		return nil
	}
	_, err = store.Node().Propose(ctx,
		kv.Op{Type: kv.OpPut, Key: caCertKey, Value: id.CA.CertPEM(), IfModRev: 0},
		kv.Op{Type: kv.OpPut, Key: caKeySealedKey, Value: sealed, IfModRev: 0})
	return err
}

func ensureObjects(ctx context.Context, store *registry.Store, clusterDNS netip.Addr) error {
	rs := store.Resources()
	nsRes, _ := rs.Lookup(corev1.SchemeGroupVersion.WithResource("namespaces"))
	svcRes, _ := rs.Lookup(corev1.SchemeGroupVersion.WithResource("services"))
	for _, ns := range systemNamespaces {
		if err := ensure(ctx, store, nsRes, "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	kubernetes := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: store.ServiceCIDR().Addr().Next().String(),
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromInt32(6443)}},
			SessionAffinity: corev1.ServiceAffinityNone,
		},
	}
	if err := ensure(ctx, store, svcRes, "default", kubernetes); err != nil {
		return err
	}
	// The cluster DNS: every board answers it itself (node/dns), so the
	// Service has no selector and no endpoints; it holds the address, and
	// shows in kubectl get svc -A as kube-dns does elsewhere.
	dns := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system",
			Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "isle-dns"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: clusterDNS.String(),
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			},
			SessionAffinity: corev1.ServiceAffinityNone,
		},
	}
	if err := ensure(ctx, store, svcRes, "kube-system", dns); err != nil {
		return err
	}
	icRes, _ := rs.Lookup(networkingv1.SchemeGroupVersion.WithResource("ingressclasses"))
	if err := ensure(ctx, store, icRes, "", ingressstatus.DefaultIngressClass()); err != nil {
		return err
	}
	pcRes, _ := rs.Lookup(schedulingv1.SchemeGroupVersion.WithResource("priorityclasses"))
	for _, pc := range strategy.SystemPriorityClasses() {
		if err := ensure(ctx, store, pcRes, "", pc); err != nil {
			return err
		}
	}
	scRes, _ := rs.Lookup(storagev1.SchemeGroupVersion.WithResource("storageclasses"))
	return ensure(ctx, store, scRes, "", volumes.LocalPathStorageClass())
}

// ensure creates obj unless it exists.
func ensure(ctx context.Context, store *registry.Store, r *registry.Resource, ns string, obj runtime.Object) error {
	_, err := store.Create(ctx, r, ns, obj, registry.WriteOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
