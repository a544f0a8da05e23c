package agent

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/isle-cluster/isle/node/dns"
	"github.com/isle-cluster/isle/node/ingress"
	"github.com/isle-cluster/isle/node/pods"
	"github.com/isle-cluster/isle/node/proxy"
)

// DefaultClusterDNS is the cluster DNS's address when Config.ClusterDNS is
// unset: the tenth of the default service range.
var DefaultClusterDNS = netip.MustParsePrefix("10.43.0.10/32").Addr()

// DefaultClusterDomain is the cluster's DNS domain when Config.ClusterDomain
// is unset.
const DefaultClusterDomain = "cluster.local"

// trafficRetry is how soon a failed update of the Service rules is tried
// again.
const trafficRetry = time.Second

// trafficCoalesce gathers the changes that come together (a rollout
// changes slices one after the other) into one update.
const trafficCoalesce = 10 * time.Millisecond

// runTraffic is the board's part of Service traffic, once the board has its
// pod CIDR: the Service rules (node/proxy), the cluster DNS on the bridge's
// address (node/dns; the cluster DNS address is sent there) and the
// ingress controller (node/ingress), all fed from informers of Services,
// EndpointSlices, Ingresses, IngressClasses, and of the TLS Secrets those
// Ingresses name (tlssecrets.go). With the
// control plane unreachable the informers keep what they had, so traffic
// keeps flowing as it was.
func (a *Agent) runTraffic(ctx context.Context) error {
	select {
	case <-a.net.ready:
	case <-ctx.Done():
		return nil
	}
	a.net.mu.Lock()
	podCIDR := a.net.cidr
	a.net.mu.Unlock()
	bridgeIP := podCIDR.Addr().Next()

	px, err := proxy.New(proxy.Config{NodeName: a.cfg.Credential.Name, ClusterCIDR: a.cfg.ClusterCIDR, PodCIDR: podCIDR,
		DNS: proxy.DNSRedirect{ServiceIP: a.cfg.ClusterDNS, Target: bridgeIP}, Logger: a.log})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer px.Close()
	upstreams, err := dns.UpstreamsFromResolvConf(a.cfg.ResolvConf)
	if err != nil {
		a.log.Warn("agent: the cluster DNS forwards no names outside the cluster", "err", err)
	}
	ds, err := dns.New(dns.Config{Addrs: []string{net.JoinHostPort(bridgeIP.String(), "53")}, Domain: a.cfg.ClusterDomain,
		Upstreams: upstreams, Logger: a.log})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	var ing *ingress.Controller
	if a.cfg.IngressHTTP != "" {
		if ing, err = ingress.New(ingress.Config{HTTPAddr: a.cfg.IngressHTTP, HTTPSAddr: a.cfg.IngressHTTPS, Logger: a.log}); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	// The cluster DNS and the ingress controller start to answer once they
	// know the Services and Ingresses: a restarted agent (an upgrade) must
	// not answer NXDOMAIN or 404 for what exists.
	serve := func() error {
		if err := ds.Start(); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		collectors := []prometheus.Collector{px.Collector(), ds.Collector()}
		if ing != nil {
			if err := ing.Start(); err != nil {
				// Services and DNS still work; the port may be another's.
				a.log.Error("agent: no ingress controller on this board", "err", err)
				ing = nil
			} else {
				collectors = append(collectors, ing.Collector())
			}
		}
		if r := a.cfg.Registerer; r != nil {
			for _, c := range collectors {
				if err := r.Register(c); err != nil {
					return fmt.Errorf("agent: traffic metrics: %w", err)
				}
			}
		}
		a.log.Info("agent: Service traffic served", "dns", bridgeIP, "cluster-dns", a.cfg.ClusterDNS, "ingress", a.cfg.IngressHTTP)
		return nil
	}
	defer func() {
		ds.Close()
		if ing != nil {
			ing.Close()
		}
		if r := a.cfg.Registerer; r != nil {
			r.Unregister(px.Collector())
			r.Unregister(ds.Collector())
			if ing != nil {
				r.Unregister(ing.Collector())
			}
		}
	}()

	inf, err := a.trafficInformers()
	if err != nil {
		return err
	}
	kick := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	secrets := newTLSSecrets(a.client, func() { poke(nil) })
	for _, i := range inf.all() {
		if _, err := i.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poke,
			UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke}); err != nil {
			return fmt.Errorf("agent: traffic informers: %w", err)
		}
		// The Services' informer is the agent's (Agent.services), already
		// running; the others are traffic's own.
		if i != inf.services {
			go i.Run(ctx.Done())
		}
	}
	if !cache.WaitForCacheSync(ctx.Done(), inf.synced()...) {
		return nil // ctx ended
	}
	var retry <-chan time.Time
	for {
		svcs, slices := listOf[*corev1.Service](inf.services), listOf[*discoveryv1.EndpointSlice](inf.slices)
		retry = nil
		if err := px.Sync(svcs, slices); err != nil {
			a.log.Warn("agent: Service rules not updated; retrying", "err", err, "in", trafficRetry)
			retry = time.After(trafficRetry)
		}
		ds.Update(svcs, slices)
		if ing != nil {
			ings, classes := listOf[*networkingv1.Ingress](inf.ingresses), listOf[*networkingv1.IngressClass](inf.classes)
			secrets.follow(ctx, ingress.TLSSecrets(ings, classes))
			ing.Update(ingress.Snapshot{Ingresses: ings, Classes: classes, Services: svcs, Slices: slices, Secrets: secrets.list()})
		}
		if serve != nil {
			if err := serve(); err != nil {
				return err
			}
			serve = nil
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

// trafficInformers are the informers of what Service traffic needs: the
// Services' is the one the pods read too.
type trafficInformers struct {
	services, slices, ingresses, classes cache.SharedIndexInformer
}

func (t trafficInformers) all() []cache.SharedIndexInformer {
	return []cache.SharedIndexInformer{t.services, t.slices, t.ingresses, t.classes}
}

func (t trafficInformers) synced() []cache.InformerSynced {
	var out []cache.InformerSynced
	for _, i := range t.all() {
		out = append(out, i.HasSynced)
	}
	return out
}

func (a *Agent) trafficInformers() (trafficInformers, error) {
	discovery, err := newGroupClient(a.cfg.Credential, a.servers, discoveryv1.SchemeGroupVersion, discoveryv1.AddToScheme)
	if err != nil {
		return trafficInformers{}, err
	}
	networking, err := newGroupClient(a.cfg.Credential, a.servers, networkingv1.SchemeGroupVersion, networkingv1.AddToScheme)
	if err != nil {
		return trafficInformers{}, err
	}
	informer := func(c *rest.RESTClient, resource string, obj runtime.Object) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(cache.NewListWatchFromClient(c, resource, "", fields.Everything()), obj, 0, cache.Indexers{})
	}
	t := trafficInformers{
		services:  a.services,
		slices:    informer(discovery, "endpointslices", &discoveryv1.EndpointSlice{}),
		ingresses: informer(networking, "ingresses", &networkingv1.Ingress{}),
		classes:   informer(networking, "ingressclasses", &networkingv1.IngressClass{}),
	}
	for _, i := range []cache.SharedIndexInformer{t.slices, t.ingresses, t.classes} {
		if err := i.SetTransform(pods.WithoutManagedFields); err != nil {
			return t, fmt.Errorf("agent: traffic informers: %w", err)
		}
	}
	return t, nil
}

// listOf is what an informer holds, as T.
func listOf[T runtime.Object](i cache.SharedIndexInformer) []T {
	objs := i.GetStore().List()
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}
