package agent

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/isle-cluster/isle/node/pods"
	"github.com/isle-cluster/isle/node/proxy"
)

// runPolicies enforces the NetworkPolicies on the board's pods
// (node/proxy's Policies), once the board has its pod CIDR. It always
// follows the NetworkPolicies; every pod and Namespace of the cluster,
// which the rules are made of, only while there is a policy: a cluster
// without any costs the board no memory for them. With the control plane
// unreachable the informers keep what they had, and so do the rules.
func (a *Agent) runPolicies(ctx context.Context) error {
	select {
	case <-a.net.ready:
	case <-ctx.Done():
		return nil
	}
	a.net.mu.Lock()
	podCIDR := a.net.cidr
	a.net.mu.Unlock()
	pols, err := proxy.NewPolicies(proxy.Config{NodeName: a.cfg.Credential.Name, ClusterCIDR: a.cfg.ClusterCIDR, PodCIDR: podCIDR, Logger: a.log})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer pols.Close()
	if r := a.cfg.Registerer; r != nil {
		if err := r.Register(pols.Collector()); err != nil {
			return fmt.Errorf("agent: policy metrics: %w", err)
		}
		defer r.Unregister(pols.Collector())
	}
	networking, err := newGroupClient(a.cfg.Credential, a.servers, networkingv1.SchemeGroupVersion, networkingv1.AddToScheme)
	if err != nil {
		return err
	}
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	policies := cache.NewSharedIndexInformer(cache.NewListWatchFromClient(networking, "networkpolicies", "", fields.Everything()),
		&networkingv1.NetworkPolicy{}, 0, cache.Indexers{})
	if err := policies.SetTransform(pods.WithoutManagedFields); err != nil {
		return fmt.Errorf("agent: policy informers: %w", err)
	}
	if err := watchAll(policies, poke); err != nil {
		return err
	}
	go policies.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), policies.HasSynced) {
		return nil
	}
	var peers *policyPeers
	defer func() {
		if peers != nil {
			peers.stop()
		}
	}()
	var retry <-chan time.Time
	for {
		st := proxy.PolicyState{Policies: listOf[*networkingv1.NetworkPolicy](policies)}
		switch {
		case len(st.Policies) > 0 && peers == nil:
			if peers, err = a.followPolicyPeers(ctx, poke); err != nil {
				return err
			}
		case len(st.Policies) == 0 && peers != nil:
			peers.stop()
			peers = nil
		}
		synced := peers == nil || peers.synced()
		if peers != nil && synced {
			st.Pods, st.Namespaces = listOf[*corev1.Pod](peers.pods), listOf[*corev1.Namespace](peers.namespaces)
		}
		retry = nil
		// Until the pods are known, the rules stay as they are: an
		// isolated pod's peers would be missing.
		if synced {
			if err := pols.Sync(st); err != nil {
				a.log.Warn("agent: NetworkPolicy rules not updated; retrying", "err", err, "in", trafficRetry)
				retry = time.After(trafficRetry)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-retry:
		case <-kick:
			time.Sleep(trafficCoalesce)
		}
	}
}

// policyPeers are the informers of every pod and Namespace, while a
// NetworkPolicy exists.
type policyPeers struct {
	pods, namespaces cache.SharedIndexInformer
	stop             context.CancelFunc
}

func (p *policyPeers) synced() bool { return p.pods.HasSynced() && p.namespaces.HasSynced() }

// followPolicyPeers starts the informers of every pod and Namespace; poke
// is called at every change, and once both have synced.
func (a *Agent) followPolicyPeers(ctx context.Context, poke func()) (*policyPeers, error) {
	ctx, cancel := context.WithCancel(ctx)
	p := &policyPeers{
		pods: cache.NewSharedIndexInformer(cache.NewListWatchFromClient(a.client, "pods", "", fields.Everything()),
			&corev1.Pod{}, 0, cache.Indexers{}),
		namespaces: cache.NewSharedIndexInformer(cache.NewListWatchFromClient(a.client, "namespaces", "", fields.Everything()),
			&corev1.Namespace{}, 0, cache.Indexers{}),
		stop: cancel,
	}
	for _, i := range []cache.SharedIndexInformer{p.pods, p.namespaces} {
		if err := i.SetTransform(policyView); err != nil {
			cancel()
			return nil, fmt.Errorf("agent: policy informers: %w", err)
		}
		if err := watchAll(i, poke); err != nil {
			cancel()
			return nil, err
		}
		go i.Run(ctx.Done())
	}
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), p.pods.HasSynced, p.namespaces.HasSynced) {
			poke()
		}
	}()
	return p, nil
}

// watchAll calls poke at every change an informer sees.
func watchAll(i cache.SharedIndexInformer, poke func()) error {
	if _, err := i.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) { poke() },
		UpdateFunc: func(_, _ any) { poke() }, DeleteFunc: func(any) { poke() }}); err != nil {
		return fmt.Errorf("agent: policy informers: %w", err)
	}
	return nil
}

// policyView keeps of a pod or Namespace only what the rules are made
// of (names, labels, a pod's node, network, container ports, phase and
// addresses), so that the cluster's pods cost the board little memory.
func policyView(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		v := &corev1.Pod{ObjectMeta: slimMeta(o.ObjectMeta), Spec: corev1.PodSpec{NodeName: o.Spec.NodeName, HostNetwork: o.Spec.HostNetwork},
			Status: corev1.PodStatus{Phase: o.Status.Phase, PodIP: o.Status.PodIP, PodIPs: o.Status.PodIPs}}
		for _, c := range o.Spec.Containers {
			if len(c.Ports) > 0 {
				v.Spec.Containers = append(v.Spec.Containers, corev1.Container{Name: c.Name, Ports: c.Ports})
			}
		}
		return v, nil
	case *corev1.Namespace:
		return &corev1.Namespace{ObjectMeta: slimMeta(o.ObjectMeta)}, nil
	}
	return obj, nil
}

func slimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion, Labels: m.Labels}
}
