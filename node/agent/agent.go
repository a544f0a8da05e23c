// Package agent is the node agent of a board (every board, servers too):
// it registers the board's Node through the Kubernetes API, keeps the
// Node's status its own, and talks to whichever server is alive, learning
// the servers from gossip. With containerd it runs the board's pods
// (package pods) and serves kubectl logs, exec and attach (package
// stream), its Pod network (package podnet) and its part in Service
// traffic: the Service rules (package proxy), the cluster DNS (package
// dns) and the ingress controller (package ingress).
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/hw"
	"github.com/isle-cluster/isle/hw/led"
	"github.com/isle-cluster/isle/node/containers"
	"github.com/isle-cluster/isle/node/gossip"
	"github.com/isle-cluster/isle/node/podnet"
	"github.com/isle-cluster/isle/node/pods"
)

// Config configures an agent.
type Config struct {
	Credential wire.Credential
	Role       gossip.Role
	// Address is the board's IP, its Node's InternalIP.
	Address string
	DataDir string
	// Gossip is the board's started member.
	Gossip *gossip.Gossip
	// Fallback API addresses, used until gossip knows a server.
	Fallback    []string
	KubeVersion string
	// PodStats gives the usage of the board's pods for the usage reports;
	// nil: NoPodStats (this board runs no containers yet).
	PodStats PodStats
	// Stream is the streaming server's handler (package stream: kubectl
	// logs, exec and attach, proxied by the API servers), served over TLS
	// on StreamPort of Address; nil: no streaming server.
	Stream http.Handler
	// StreamPort is the streaming server's port, reported in the Node's
	// status.daemonEndpoints; 0: DefaultStreamPort (10250).
	StreamPort int
	Logger     *slog.Logger
	// Now is the board's clock (package clock), at which the agent checks
	// certificates and reports usage; nil: time.Now.
	Now func() time.Time
	// MaxPods is how many pods the board takes (its Node's pods
	// capacity); 0: 110.
	MaxPods int
	// ReservedCPU is the CPU kept from pods for the system and isle, in
	// millicores; 0: none.
	ReservedCPU int64
	// ReservedMemory is the memory kept from pods for the system and
	// isle, in bytes; 0: 10% of the board's memory.
	ReservedMemory int64
	// ReservedStorage is the space of DataDir's filesystem kept from pods'
	// ephemeral storage, in bytes; 0: none.
	ReservedStorage int64
	// MemoryPressureThreshold is the available memory (MemAvailable), in
	// bytes, below which the Node reports MemoryPressure; 0: 100 MiB or 5%
	// of the board's memory, whichever is smaller.
	MemoryPressureThreshold int64
	// RuntimeVersion is the container runtime as the Node reports it
	// ("containerd://1.7.35"); "": none reported. Set from containerd
	// when Containerd is.
	RuntimeVersion string
	// Containerd is containerd's socket; the agent runs the board's pods
	// through it (and serves Stream and PodStats itself). "": the board
	// runs no containers, and the deletions of pods bound to it are
	// finished as if they had stopped.
	Containerd string
	// ContainerdNamespace holds isle's containers; "": "isle".
	ContainerdNamespace string
	// RunDir holds what does not outlive a reboot (network namespaces,
	// stdio FIFOs); "": /run/isle.
	RunDir string
	// PodResync is how often every pod is synced without a cause (configMap
	// and secret changes reach volumes then); 0: a minute.
	PodResync time.Duration
	// CgroupParent holds the pods' cgroups; "": /isle.
	CgroupParent string
	// RegistryMirrors send image pulls of a registry host to another
	// endpoint (containers.Config.Mirrors).
	RegistryMirrors map[string]string
	// InsecureRegistries are registries (host:port) spoken to in plain
	// HTTP besides those on loopback.
	InsecureRegistries []string
	// ClusterCIDR is the range every node's pod CIDR comes from (the same
	// on every board); invalid: 10.42.0.0/16.
	ClusterCIDR netip.Prefix
	// ClusterDNS is the cluster DNS's Service address, the nameserver of
	// pods with dnsPolicy ClusterFirst; the board's DNS answers it.
	// Invalid: 10.43.0.10.
	ClusterDNS netip.Addr
	// ClusterDomain is the cluster's DNS domain; "": cluster.local.
	ClusterDomain string
	// ResolvConf is the board's resolver configuration: the cluster DNS
	// forwards names outside the cluster to its nameservers, and pods with
	// dnsPolicy Default get it. "": /etc/resolv.conf.
	ResolvConf string
	// IngressHTTP and IngressHTTPS are the ingress controller's listen
	// addresses (":80", ":443"); IngressHTTP "": no ingress controller.
	IngressHTTP, IngressHTTPS string
	// LEDs are the board's readiness and activity LEDs (hw/led), opened and
	// closed by the caller; the agent shows the Node's readiness on them.
	// Nil: none.
	LEDs *led.Board
	// Registerer takes the agent's metrics; nil: none.
	Registerer prometheus.Registerer
}

// Agent is a running node agent.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	facts   hw.Facts
	servers *servers
	client  *rest.RESTClient
	report  *nodeReport
	pods    *pods.Manager // nil: the board runs no containers
	net     *podNetwork   // nil: the board runs no containers
	// services is the informer of all the cluster's Services, one for
	// the pods' environments and Service traffic; nil: the board runs no
	// containers.
	services cache.SharedIndexInformer
	// listImages lists the runtime's images for the Node's status; nil
	// without a runtime.
	listImages func(context.Context) ([]containers.ImageInfo, error)
	// imagesRead is when refreshImages last read them (under checkMu).
	imagesRead time.Time
	// checkMu serializes checkPressure (the pressure loop, watchRuntime).
	checkMu sync.Mutex
	// nodeLost is set while the control plane holds the Node not Ready
	// and the agent could not post it back.
	nodeLost atomic.Bool
	// trust is the CAs the board trusts; stream its streaming server (nil:
	// none).
	trust  *caTrust
	stream *streamServer
	// saved is the credential as saved in the data directory, which the
	// agent changes (the servers it last saw, the CAs it trusts) under
	// credMu; cfg.Credential stays as the agent started with it (its name
	// and node token do not change).
	credMu sync.Mutex
	saved  wire.Credential
}

// Run registers the board's Node and keeps it until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := cfg.Credential.Validate(); err != nil {
		return fmt.Errorf("agent: credential: %w", err)
	}
	facts, err := hw.Read()
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a := &Agent{cfg: cfg, log: cfg.Logger.With("node", cfg.Credential.Name), facts: facts}
	a.saved = cfg.Credential
	if a.trust, err = newCATrust(cfg.Credential.CACert); err != nil {
		return err
	}
	a.servers = &servers{g: cfg.Gossip, fallback: cfg.Fallback, now: cfg.Now, log: a.log, trust: a.trust}
	if a.cfg.RunDir == "" {
		a.cfg.RunDir = "/run/isle"
	}
	if !a.cfg.ClusterDNS.IsValid() {
		a.cfg.ClusterDNS = DefaultClusterDNS
	}
	if a.cfg.ClusterDomain == "" {
		a.cfg.ClusterDomain = DefaultClusterDomain
	}
	if a.cfg.ResolvConf == "" {
		a.cfg.ResolvConf = "/etc/resolv.conf"
	}
	// A board that cannot run pods (its memory cgroup is off) still joins,
	// as a Node that is NotReady and says why, and its readiness LED
	// blinks fast: it is seen across the room, and the fix is in its
	// Node's Ready condition.
	blocked := ""
	if cfg.Containerd != "" {
		if err := hw.CheckMemoryCgroup("/"); err != nil {
			blocked = strings.TrimPrefix(err.Error(), "hw: ")
			a.log.Error("agent: the board cannot run pods; its Node stays NotReady", "err", err)
		}
	}
	var rt *containers.Runtime
	if cfg.Containerd != "" && blocked == "" {
		if rt, err = a.connectRuntime(ctx); err != nil || rt == nil {
			return err
		}
		defer rt.Close()
		a.cfg.RuntimeVersion = "containerd://" + rt.Version()
		if a.net, err = a.newPodNetwork(); err != nil {
			return err
		}
		defer a.net.Close()
		if cfg.Registerer != nil {
			if err := cfg.Registerer.Register(a.net.Collector()); err != nil {
				return fmt.Errorf("agent: pod network metrics: %w", err)
			}
		}
	}
	if a.report, err = newNodeReport(a.cfg, facts, blocked); err != nil {
		return err
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(newBoardCollector("/", cfg.LEDs, a.log)); err != nil {
			return fmt.Errorf("agent: board metrics: %w", err)
		}
	}
	if a.client, err = newClient(cfg.Credential, a.servers); err != nil {
		return err
	}
	if rt != nil {
		if a.pods, err = a.startPods(rt); err != nil {
			return err
		}
		a.listImages = rt.Images
	}
	if err := a.cfg.streamDefaults(); err != nil {
		return err
	}
	if err := a.serveStreams(ctx); err != nil {
		return err
	}
	if err := retry(ctx, a.log, "register the Node", a.register); err != nil {
		return err
	}
	go a.followCA(ctx, cfg.Credential.Name, a.stream)
	a.log.Info("agent: Node registered", "server", a.servers.current(), "arch", facts.Platform(), "cpus", facts.CPUs,
		"memory", facts.Memory)
	if a.cfg.LEDs != nil {
		show := led.Ready
		if blocked != "" {
			show = led.NotReady
		}
		a.cfg.LEDs.SetReadiness(show)
		go a.publishLEDs(ctx, a.cfg.LEDs)
	}
	if rt != nil {
		go rt.Run(ctx)
		go a.services.Run(ctx.Done())
		go func() {
			if err := a.pods.Run(ctx); err != nil {
				a.log.Error("agent: pods stopped", "err", err)
			}
		}()
		go func() {
			t := time.NewTicker(runtimeCheckInterval)
			defer t.Stop()
			a.watchRuntime(ctx, func(ctx context.Context) bool { return rt.Serving(ctx, runtimeCheckInterval) }, t.C)
		}()
		go func() {
			if err := a.runTraffic(ctx); err != nil {
				a.log.Error("agent: Service traffic stopped", "err", err)
			}
		}()
		go func() {
			if err := a.runPolicies(ctx); err != nil {
				a.log.Error("agent: NetworkPolicy rules stopped", "err", err)
			}
		}()
	}
	stats, err := newStatsPusher(cfg.Credential, a.servers, a.cfg.PodStats, a.log)
	if err != nil {
		return err
	}
	go stats.run(ctx, wire.ReportInterval)
	go a.watchPressure(ctx)
	return a.run(ctx)
}

// retry calls f until it succeeds or ctx ends, backing off to 5 s.
func retry(ctx context.Context, log *slog.Logger, what string, f func(context.Context) error) error {
	backoff := 200 * time.Millisecond
	for {
		err := f(ctx)
		if err == nil {
			return nil
		}
		log.Log(ctx, retryLevel(err), "agent: failed to "+what+"; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// retryLevel is the level of a failure that is retried: debug when the API
// servers are unreachable, which servers.dial logs once for all, warn
// otherwise.
func retryLevel(err error) slog.Level {
	if Unreachable(err) {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

// register creates the board's Node, or takes over the one it had before
// (same name, same credential), with labels and status of this board.
func (a *Agent) register(ctx context.Context) error {
	name := a.cfg.Credential.Name
	labels := nodeLabels(name, a.cfg.Role, a.facts)
	n := &corev1.Node{}
	err := a.client.Get().Resource("nodes").Name(name).Do(ctx).Into(n)
	switch {
	case apierrors.IsNotFound(err):
		n = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: a.annotations()}}
		created := &corev1.Node{}
		if err = a.client.Post().Resource("nodes").Body(n).Do(ctx).Into(created); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create Node %s: %w", name, err)
		}
		if err != nil {
			return fmt.Errorf("create Node %s: created meanwhile; again", name)
		}
		n = created
	case err != nil:
		return fmt.Errorf("get Node %s: %w", name, err)
	default:
		changed := false
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for k, v := range labels {
			if cur, ok := n.Labels[k]; !ok || cur != v {
				n.Labels[k], changed = v, true
			}
		}
		for k, v := range a.annotations() {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			if cur, ok := n.Annotations[k]; !ok || cur != v {
				n.Annotations[k], changed = v, true
			}
		}
		if changed {
			updated := &corev1.Node{}
			if err = a.client.Put().Resource("nodes").Name(name).Body(n).Do(ctx).Into(updated); err != nil {
				return fmt.Errorf("update Node %s labels and annotations: %w", name, err)
			}
			n = updated
		}
	}
	if a.net != nil && n.Spec.PodCIDR != "" {
		// A board that restarts attaches its pods again before it
		// watches its Node.
		if err := a.net.setPodCIDR(n.Spec.PodCIDR); err != nil {
			a.log.Error("agent: pod network", "err", err)
		}
	}
	return a.postStatus(ctx, n)
}

// annotations are what the board says of itself on its Node: its model,
// and where its local-path volumes go.
func (a *Agent) annotations() map[string]string {
	out := map[string]string{AnnotationLocalPathRoot: pods.LocalPathRoot(a.cfg.DataDir)}
	if a.facts.Model != "" {
		out[AnnotationModel] = a.facts.Model
	}
	if a.facts.Serial != "" {
		out[AnnotationSerial] = a.facts.Serial
	}
	return out
}

// postStatus writes the agent's view of n's status if it differs.
func (a *Agent) postStatus(ctx context.Context, n *corev1.Node) error {
	n = n.DeepCopy()
	want := a.report.status(time.Now())
	if a.cfg.Stream != nil {
		want.DaemonEndpoints.KubeletEndpoint.Port = int32(a.cfg.StreamPort)
	}
	if !applyStatus(n, want) {
		return nil
	}
	if err := a.client.Put().Resource("nodes").Name(n.Name).SubResource("status").Body(n).Do(ctx).Error(); err != nil {
		return fmt.Errorf("update Node %s status: %w", n.Name, err)
	}
	return nil
}

// run watches the board's own Node (its pod CIDR goes into gossip; a Ready
// condition that the control plane marked Unknown while the board was
// unreachable is posted again) and keeps the saved server list current.
func (a *Agent) run(ctx context.Context) error {
	name := a.cfg.Credential.Name
	lw := cache.NewListWatchFromClient(a.client, "nodes", "", fields.OneTermEqualSelector("metadata.name", name))
	inf := cache.NewSharedIndexInformer(lw, &corev1.Node{}, 0, cache.Indexers{})
	kick := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke}); err != nil {
		return fmt.Errorf("agent: watch Node: %w", err)
	}
	go inf.Run(ctx.Done())
	go func() {
		if a.pods != nil {
			return
		}
		if err := finishDeletions(ctx, a.client, name, a.log); err != nil {
			a.log.Error("agent: watch the board's pods", "err", err)
		}
	}()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil // ctx ended
	}

	known := map[string]podnet.Peer{} // the pod CIDRs boards announced (peersOf)
	for {
		changed := a.cfg.Gossip.Changed()
		a.saveServers()
		a.showCutOff()
		if a.net != nil {
			if err := a.net.SetPeers(peersOf(a.cfg.Gossip.Members(), name, known)); err != nil {
				a.log.Warn("agent: routes to other boards' pods", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-kick:
			obj, exists, err := inf.GetStore().GetByKey(name)
			if err == nil && !exists {
				// Deleted by an administrator (`kubectl delete node`):
				// register again, as a kubelet does.
				_ = retry(ctx, a.log, "register the Node again", a.register)
				continue
			}
			if err != nil {
				continue
			}
			a.follow(ctx, obj.(*corev1.Node))
		}
	}
}

func (a *Agent) follow(ctx context.Context, n *corev1.Node) {
	if a.net != nil && n.Spec.PodCIDR != "" {
		if err := a.net.setPodCIDR(n.Spec.PodCIDR); err != nil {
			a.log.Error("agent: pod network", "err", err)
		}
	}
	if cidr := n.Spec.PodCIDR; cidr != "" && cidr != a.cfg.Gossip.Self().PodCIDR {
		if err := a.cfg.Gossip.UpdateMeta(func(m *gossip.Meta) { m.PodCIDR = cidr }); err != nil {
			a.log.Warn("agent: pod CIDR not announced", "err", err)
		} else {
			// The boards route to this board's pods once they know its
			// CIDR: to each of them now, not at the next full exchange
			// if the broadcast missed one.
			a.log.Info("agent: pod CIDR assigned", "cidr", cidr, "boards told", a.cfg.Gossip.Push())
		}
	}
	if !readyByAgent(n) {
		err := a.postStatus(ctx, n)
		if err != nil && !errors.Is(err, context.Canceled) {
			a.log.Warn("agent: status not posted", "err", err)
		} else {
			a.log.Info("agent: Ready posted again")
		}
		// Until the control plane has it again, the Node is lost to it.
		a.nodeLost.Store(err != nil)
		a.showCutOff()
	}
}

// showCutOff tells the readiness LED whether the board is cut off from
// the control plane: no server is in its gossip, or the control plane
// marked its Node lost and the agent could not post it back.
func (a *Agent) showCutOff() {
	if a.cfg.LEDs != nil {
		a.cfg.LEDs.SetCutOff(len(a.cfg.Gossip.Servers()) == 0 || a.nodeLost.Load())
	}
}

// saveServers records the servers' gossip addresses when they change, so
// the board finds the cluster after a reboot.
func (a *Agent) saveServers() {
	var addrs []string
	for _, m := range a.cfg.Gossip.Servers() {
		addrs = append(addrs, net.JoinHostPort(m.Addr.Addr().String(), strconv.Itoa(int(m.Addr.Port()))))
	}
	a.credMu.Lock()
	_, changed := a.saved.WithServers(addrs)
	a.credMu.Unlock()
	if !changed {
		return
	}
	if err := a.saveCredential(func(c *wire.Credential) { *c, _ = c.WithServers(addrs) }); err != nil {
		a.log.Warn("agent: server list not saved", "err", err)
	}
}
