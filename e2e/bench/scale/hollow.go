package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/isle-cluster/isle/control/apiserver"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/node/agent"
	"github.com/isle-cluster/isle/node/bootstrap"
	"github.com/isle-cluster/isle/node/gossip"
)

// A hollow board is a board without containers, many to a process, as
// kubemark's hollow nodes: a real gossip member on an address of its own,
// joined with the agent token through the servers' /isle/v1 join, and the
// real node agent (package agent: its Node registered and kept, its
// status, its usage reports every 15 s, the deletions of its pods
// finished). What containerd would do is hollow: each pod bound to the
// board "runs" at once — its status becomes Running and Ready, with an
// address of the board's pod CIDR, as the kubelet's would once its
// containers started — and its usage is reported. The watches every
// board keeps for its Service rules and ingress controller (Services,
// EndpointSlices, Ingresses, IngressClasses, NetworkPolicies) are kept
// open too, their streams read but not decoded (streams.go).
//
// Against a real board the servers see one more watch of the board's pods:
// the agent without containerd watches them to finish deletions, and the
// hollow kubelet watches them to start them.
type hollow struct {
	name   string
	addr   netip.Addr
	dir    string
	g      *gossip.Gossip
	cancel context.CancelFunc
	done   chan struct{} // closed when the agent has returned
	pods   *hollowPods
}

// fleet is the process's hollow boards.
type fleet struct {
	token   wire.Token
	servers []*server
	base    string
	wire    *prometheus.Registry // the gossip bytes of every board of the process
	log     *slog.Logger

	mu     sync.Mutex
	boards []*hollow
}

// hollowAddr is the loopback address of hollow board i (0-based).
func hollowAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, 1, byte(i / 250), byte(i%250 + 1)})
}

// add starts hollow board i: it joins, gossips and registers its Node.
func (f *fleet) add(ctx context.Context, i int) (*hollow, error) {
	h := &hollow{name: fmt.Sprintf("hollow-%03d", i), addr: hollowAddr(i), done: make(chan struct{})}
	h.dir = filepath.Join(f.base, "boards", h.name)
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		return nil, fmt.Errorf("hollow %s: %w", h.name, err)
	}
	apis := make([]string, len(f.servers))
	seeds := make([]string, len(f.servers))
	for j := range f.servers {
		// Each board asks the servers in its own order, as boards that
		// found different servers first.
		k := (i + j) % len(f.servers)
		apis[j], seeds[j] = f.servers[k].api(), f.servers[k].gossip()
	}
	jctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	resp, err := bootstrap.NewClient(f.token, time.Now).Join(jctx, apis,
		wire.JoinRequest{Name: h.name, Role: wire.RoleAgent, Release: wire.Release}, "")
	if err != nil {
		return nil, fmt.Errorf("hollow %s: %w", h.name, err)
	}
	cred := wire.Credential{Name: h.name, NodeToken: resp.NodeToken, CACert: resp.CACert, GossipKey: f.token.GossipKey, Servers: seeds}
	if err := cred.Save(h.dir); err != nil {
		return nil, fmt.Errorf("hollow %s: %w", h.name, err)
	}
	var reg prometheus.Registerer
	if i == 0 {
		reg = f.wire // the wire bytes are counted for the whole process
	}
	h.g, err = gossip.Start(gossip.Config{Meta: gossip.Meta{Name: h.name, Role: gossip.RoleAgent, Arch: runtime.GOARCH, Version: "hollow"},
		Addr: h.addr, Key: cred.GossipKey, Logger: f.log, Registerer: reg, Uncompressed: true})
	if err != nil {
		return nil, fmt.Errorf("hollow %s: %w", h.name, err)
	}
	if _, err := h.g.Join(seeds); err != nil {
		_ = h.g.Stop()
		return nil, fmt.Errorf("hollow %s: gossip: %w", h.name, err)
	}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "https://" + apis[0], BearerToken: cred.NodeToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: cred.CACert, ServerName: wire.APIServerName},
		UserAgent:       "isle-agent/" + h.name, QPS: 20, Burst: 40})
	if err != nil {
		_ = h.g.Stop()
		return nil, fmt.Errorf("hollow %s: client: %w", h.name, err)
	}
	h.pods = &hollowPods{node: h.name, addr: h.addr.String(), client: cs, log: f.log, running: map[types.UID]*corev1.Pod{}}
	actx, stop := context.WithCancel(ctx)
	h.cancel = stop
	go func() {
		defer close(h.done)
		err := agent.Run(actx, agent.Config{Credential: cred, Role: gossip.RoleAgent, Address: h.addr.String(), DataDir: h.dir,
			Gossip: h.g, KubeVersion: apiserver.KubeVersion, PodStats: h.pods, Logger: f.log, Now: time.Now,
			RunDir: filepath.Join(h.dir, "run")})
		if err != nil && actx.Err() == nil {
			f.log.Error("hollow board stopped", "board", h.name, "err", err)
		}
	}()
	go h.pods.run(actx)
	watchProxyKinds(actx, cs, f.log)
	f.mu.Lock()
	f.boards = append(f.boards, h)
	f.mu.Unlock()
	return h, nil
}

// grow adds hollow boards until there are n, wave at a time: each wave's
// Nodes Ready, and every board's gossip knowing every board alive, before
// the next. 150 boards joining at once in one process (each new member
// gossiped to every other by every other, on one machine's CPUs) starved
// it: members missed their probes, were declared dead and came back, and
// that churn was more gossip still. Boards of a real cluster join at the
// pace of hands plugging them in.
func (f *fleet) grow(ctx context.Context, admin kubernetes.Interface, n, wave int) error {
	for have := len(f.boards); have < n; have = len(f.boards) {
		k := min(wave, n-have)
		var addErr error
		benchkit.Parallel(ctx, k, 8, func(ctx context.Context, i int) {
			if _, err := f.add(ctx, have+i); err != nil && addErr == nil {
				addErr = err
			}
		})
		if addErr != nil {
			return addErr
		}
		if err := waitNodesReady(ctx, admin, have+k+3, 5*time.Minute); err != nil {
			return err
		}
		// On two CPUs, 250 hollow boards' gossip in one process takes
		// minutes to see a wave alive everywhere (2 minutes was once short).
		if err := f.waitGossip(ctx, have+k+3, 5*time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// waitGossip waits until every board's gossip has want members alive.
func (f *fleet) waitGossip(ctx context.Context, want int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		short := 0
		for _, h := range f.boards {
			alive := 0
			for _, m := range h.g.Members() {
				if m.State == gossip.Alive {
					alive++
				}
			}
			if alive < want {
				short++
			}
		}
		if short == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gossip: %d boards see fewer than %d members alive after %v", short, want, d)
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// kill stops the board as a power cut would: no goodbye in gossip, its
// agent gone.
func (h *hollow) kill() {
	_ = h.g.Stop()
	h.cancel()
	<-h.done
}

// stopAll stops every board, leaving the gossip.
func (f *fleet) stopAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	var wg sync.WaitGroup
	for _, h := range f.boards {
		wg.Go(func() {
			h.cancel()
			<-h.done
			_ = h.g.Leave(time.Second)
		})
	}
	wg.Wait()
	f.boards = nil
}

// hollowPods is the hollow kubelet: it starts the pods bound to its board
// at once, and reports their usage (agent.PodStats).
type hollowPods struct {
	node, addr string
	client     kubernetes.Interface
	log        *slog.Logger

	mu      sync.Mutex
	cidr    netip.Prefix
	next    int // the last host number given in cidr
	running map[types.UID]*corev1.Pod
}

func (p *hollowPods) run(ctx context.Context) {
	lw := cache.NewListWatchFromClient(p.client.CoreV1().RESTClient(), "pods", "", fields.OneTermEqualSelector("spec.nodeName", p.node))
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	queue := make(chan *corev1.Pod, 4096)
	seen := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		p.mu.Lock()
		_, runs := p.running[pod.UID]
		if pod.DeletionTimestamp != nil {
			delete(p.running, pod.UID)
		}
		p.mu.Unlock()
		// A pod it runs that the control plane marked not ready (its
		// board was lost for a moment) is posted ready again, as a
		// kubelet's status sync does; a pod it does not run yet starts.
		lost := runs && pod.Status.Phase == corev1.PodRunning && !ready(pod)
		if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodPending && !lost {
			return
		}
		select {
		case queue <- pod:
		default:
			p.log.Warn("hollow: pod queue full; the pod waits for the next change", "pod", pod.Namespace+"/"+pod.Name)
		}
	}
	gone := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			p.mu.Lock()
			delete(p.running, pod.UID)
			p.mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, n any) { seen(n) }, DeleteFunc: gone}); err != nil {
		p.log.Error("hollow: watch pods", "err", err)
		return
	}
	go inf.Run(ctx.Done())
	for {
		select {
		case <-ctx.Done():
			return
		case pod := <-queue:
			if err := p.start(ctx, pod); err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
				// Again in a second, as the kubelet's status manager.
				p.log.Warn("hollow: pod not started; retrying", "pod", pod.Namespace+"/"+pod.Name, "err", err)
				time.AfterFunc(time.Second, func() {
					select {
					case queue <- pod:
					default:
					}
				})
			}
		}
	}
}

// start posts the pod's status as a board's would once its containers run.
func (p *hollowPods) start(ctx context.Context, pod *corev1.Pod) error {
	ip, started := pod.Status.PodIP, pod.Status.StartTime
	if ip == "" {
		var err error
		if ip, err = p.podIP(ctx); err != nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		pod = pod.DeepCopy()
		now := metav1.Now()
		if started == nil {
			started = &now
		}
		st := &pod.Status
		st.Phase, st.HostIP, st.PodIP, st.StartTime = corev1.PodRunning, p.addr, ip, started
		st.HostIPs, st.PodIPs = []corev1.HostIP{{IP: p.addr}}, []corev1.PodIP{{IP: ip}}
		for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			setCondition(st, t, now)
		}
		st.ContainerStatuses = nil
		yes := true
		for _, c := range pod.Spec.Containers {
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
				ImageID: "hollow://" + c.Image, ContainerID: "hollow://" + string(pod.UID) + "/" + c.Name, Ready: true, Started: &yes,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: *started}}})
		}
		out, err := p.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if err == nil {
			p.mu.Lock()
			p.running[out.UID] = out
			p.mu.Unlock()
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == 3 {
			return fmt.Errorf("hollow: pod status: %w", err)
		}
		if pod, err = p.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
			return err
		}
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodRunning && ready(pod) || pod.Status.Phase != corev1.PodPending && pod.Status.Phase != corev1.PodRunning {
			return nil
		}
	}
}

func setCondition(st *corev1.PodStatus, t corev1.PodConditionType, now metav1.Time) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			st.Conditions[i].Status, st.Conditions[i].LastTransitionTime = corev1.ConditionTrue, now
			return
		}
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
}

// podIP gives the next address of the board's pod CIDR (a /24: 253
// addresses, more than a board's 110 pods).
func (p *hollowPods) podIP(ctx context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cidr.IsValid() {
		n, err := p.client.CoreV1().Nodes().Get(ctx, p.node, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("hollow: pod CIDR: %w", err)
		}
		if p.cidr, err = netip.ParsePrefix(n.Spec.PodCIDR); err != nil {
			return "", errors.New("hollow: the Node has no pod CIDR yet")
		}
	}
	p.next = p.next%253 + 1
	a := p.cidr.Addr().As4()
	a[3] = byte(p.next + 1)
	return netip.AddrFrom4(a).String(), nil
}

// PodUsage reports each running pod's containers at 1 millicore and 4 MiB.
func (p *hollowPods) PodUsage(context.Context) ([]wire.PodUsage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]wire.PodUsage, 0, len(p.running))
	for _, pod := range p.running {
		u := wire.PodUsage{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
		for _, c := range pod.Spec.Containers {
			u.Containers = append(u.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name, Usage: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("4Mi")}})
		}
		out = append(out, u)
	}
	return out, nil
}
