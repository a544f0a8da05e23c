// Package nodelifecycle is the node lifecycle controller.
package nodelifecycle

import (
	"context"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// Liveness is what the node lifecycle controller knows of the boards:
// the cluster's membership (gossip, which the board's assembly adapts).
// No board renews anything in the store to say it is alive; the leader
// reads it from the membership.
type Liveness interface {
	// Boards are the members known, each once.
	Boards() []Board
	// Changed is closed at the next change of a member (a suspicion may
	// come without one: Boards is read at each resync too).
	Changed() <-chan struct{}
}

// Board is a member of the cluster's membership, by its Node's name.
type Board struct {
	Name  string
	State BoardState
}

// BoardState is a member's standing in the membership.
type BoardState string

// The states of a member.
const (
	BoardAlive   BoardState = "alive"
	BoardSuspect BoardState = "suspect" // missed probes; others may still refute it
	BoardDead    BoardState = "dead"    // declared failed
	BoardLeft    BoardState = "left"    // said goodbye
)

// Config tunes the node lifecycle controller.
type Config struct {
	// Grace is how long a Node that no board in gossip answers for keeps
	// its status after this controller starts (a new leader must hear the
	// gossip first). Default 40 s, Kubernetes' node-monitor-grace-period.
	Grace time.Duration
	// PodCIDR is the range from which each Node gets a /PodCIDRBits
	// block. Default 10.42.0.0/16 with /24s.
	PodCIDR     netip.Prefix
	PodCIDRBits int
	// Resync is how often every Node is looked at even without news.
	// Default 1 s.
	Resync time.Duration
	// PodGC is how often pods bound to Nodes that no longer exist are
	// looked for; one found on two passes in a row is deleted at once (no
	// agent is left to finish its graceful deletion). Default 20 s.
	PodGC time.Duration
	// Hold is how long after this controller starts the tolerations of
	// pods on a board it has never heard in gossip start counting: after
	// the control plane's own outage (every server restarted) the boards
	// may simply not have found the servers yet, and their pods are
	// running. Boards seen to die are not held. Default 5 min.
	Hold time.Duration
}

// Above largeCluster Nodes a partial disruption slows evictions to one
// Node's pods every evictionInterval instead of stopping them, as
// kube-controller-manager's secondary eviction rate does.
const (
	largeCluster     = 50
	evictionInterval = 100 * time.Second
)

// DefaultPodCIDR is the default cluster range of Pod addresses.
var DefaultPodCIDR = netip.MustParsePrefix("10.42.0.0/16")

// Store is what the controller uses of the registry (a *registry.Store).
type Store interface {
	Resources() *registry.Resources
	List(ctx context.Context, r *registry.Resource, ns string, opts metav1.ListOptions) (runtime.Object, error)
	Watch(ctx context.Context, r *registry.Resource, ns string, opts metav1.ListOptions, with ...registry.ScanOption) (<-chan registry.WatchEvent, error)
	Mutate(ctx context.Context, r *registry.Resource, ns, name, sub string, change func(obj runtime.Object) error) (runtime.Object, error)
	Delete(ctx context.Context, r *registry.Resource, ns, name string, opts metav1.DeleteOptions) (runtime.Object, bool, error)
}

// Controller turns gossip liveness into Node conditions and taints,
// evicts pods from unreachable boards after their tolerations run out, and
// gives each Node its pod CIDR. It writes only on changes: an idle cluster
// of healthy boards costs the store nothing, and it reads the pods from a
// watch, never a list: lost boards cost it nothing while no pod is due.
type Controller struct {
	store    Store
	liveness Liveness
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	pods     *podIndex
	// orphans are the UIDs of pods whose Node was missing on the last pass
	// of the pod garbage collection.
	orphans map[string]bool
	// disruption is the cluster's standing on the last pass; resumed is
	// a grace after evictions last resumed after a disruption (tolerations
	// count from then); evictedAt is when the last Node's pods were evicted in a
	// partial disruption of a large cluster.
	disruption disruption
	resumed    time.Time
	evictedAt  time.Time
}

// disruption is how many of the cluster's Nodes are not ready at once,
// as kube-controller-manager's zone states have it: when all, or most of
// at least three, are lost together, the likelier cause is the control
// plane's own outage or a switch, and evicting would only move every pod
// to the boards that are left, or nowhere.
type disruption string

const (
	disruptionNone    disruption = ""
	disruptionPartial disruption = "partial" // at least 55% and more than two not ready
	disruptionFull    disruption = "full"    // every Node not ready
)

func disruptionOf(notReady, total int) disruption {
	switch {
	case notReady > 0 && notReady == total:
		return disruptionFull
	case notReady > 2 && float64(notReady) >= 0.55*float64(total):
		return disruptionPartial
	}
	return disruptionNone
}

// New returns the node lifecycle controller.
func New(store Store, liveness Liveness, cfg Config, log *slog.Logger) *Controller {
	if cfg.Grace <= 0 {
		cfg.Grace = 40 * time.Second
	}
	if !cfg.PodCIDR.IsValid() {
		cfg.PodCIDR = DefaultPodCIDR
	}
	if cfg.PodCIDRBits == 0 {
		cfg.PodCIDRBits = 24
	}
	if cfg.Resync <= 0 {
		cfg.Resync = time.Second
	}
	if cfg.PodGC <= 0 {
		cfg.PodGC = 20 * time.Second
	}
	if cfg.Hold <= 0 {
		cfg.Hold = 5 * time.Minute
	}
	return &Controller{store: store, liveness: liveness, cfg: cfg, log: log, now: time.Now, pods: newPodIndex(), orphans: map[string]bool{}}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "nodelifecycle" }

var (
	nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	podsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// Messages kubectl describe shows on a Node the control plane lost.
const (
	reasonUnknown    = "NodeStatusUnknown"
	msgDead          = "isle agent stopped answering gossip."
	msgLeft          = "The board left the cluster."
	msgNeverSeen     = "No board of this name is in the cluster's gossip."
	conditionsReason = "isle agent stopped posting node status."
)

// Run reconciles until ctx ends (when this member stops leading). It
// acts once its watch of the pods has brought every pod.
func (c *Controller) Run(ctx context.Context) {
	nodes, _ := c.store.Resources().Lookup(nodesGVR)
	pods, _ := c.store.Resources().Lookup(podsGVR)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.pods.follow(ctx, c.store, pods, c.log) })
	started := c.now()
	t := time.NewTicker(c.cfg.Resync)
	defer t.Stop()
	gc := time.NewTicker(c.cfg.PodGC)
	defer gc.Stop()
	for {
		changed := c.liveness.Changed()
		c.sync(ctx, nodes, pods, started)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
		case <-gc.C:
			c.collectOrphans(ctx, nodes, pods)
		}
	}
}

// collectOrphans deletes, without grace, pods bound to Nodes that are gone
// (a board removed with isle member remove, or kubectl delete node), as
// Kubernetes' pod garbage collector does: no agent is left to finish them,
// and their controllers make them again elsewhere.
func (c *Controller) collectOrphans(ctx context.Context, nodes, pods *registry.Resource) {
	if !c.pods.ready() {
		return
	}
	nl, err := c.store.List(ctx, nodes, "", metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return
	}
	exists := map[string]bool{}
	for _, n := range nl.(*corev1.NodeList).Items {
		exists[n.Name] = true
	}
	seen := map[string]bool{}
	for _, p := range c.pods.matching(nil, func(p *boundPod) bool { return !exists[p.node] }) {
		uid := string(p.uid)
		seen[uid] = true
		if !c.orphans[uid] {
			continue // first sighting: the Node may be on its way
		}
		zero := int64(0)
		if _, _, err := c.store.Delete(ctx, pods, p.namespace, p.name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.uid}}); err == nil {
			c.log.Info("nodelifecycle: pod of a node that is gone deleted", "pod", p.key(), "node", p.node)
		}
	}
	c.orphans = seen
}

func (c *Controller) sync(ctx context.Context, nodes, pods *registry.Resource, started time.Time) {
	if !c.pods.ready() {
		return // markPodsNotReady and evict need every pod
	}
	list, err := c.store.List(ctx, nodes, "", metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		c.log.Warn("nodelifecycle: list nodes", "err", err)
		return
	}
	members := map[string]Board{}
	for _, m := range c.liveness.Boards() {
		members[m.Name] = m
	}
	items := list.(*corev1.NodeList).Items
	used := map[netip.Prefix]bool{}
	for i := range items {
		if p, err := netip.ParsePrefix(items[i].Spec.PodCIDR); err == nil {
			used[p] = true
		}
	}
	now := c.now()
	// heldUntil is when the tolerations of pods on boards never heard in
	// gossip since this controller started begin to count.
	heldUntil := map[string]time.Time{}
	// alive are the boards gossip shows alive: an unreachable taint on
	// their Node is stale (a board back from an outage before its agent
	// posted Ready again), and evicts nothing.
	alive := map[string]bool{}
	notReady := 0
	for i := range items {
		n := &items[i]
		if ctx.Err() != nil {
			return
		}
		m, seen := members[n.Name]
		if !seen {
			heldUntil[n.Name] = started.Add(c.cfg.Hold)
		}
		alive[n.Name] = seen && m.State == BoardAlive
		msg := ""
		switch {
		case !seen && now.Sub(started) >= c.cfg.Grace:
			msg = msgNeverSeen
		case seen && m.State == BoardDead:
			msg = msgDead
		case seen && m.State == BoardLeft:
			msg = msgLeft
		}
		if msg != "" && kit.NodeReadyStatus(n) != corev1.ConditionUnknown {
			if marked := c.markUnknown(ctx, nodes, n.Name, msg, now); marked != nil {
				n = marked
			}
		}
		// The pods of a lost board are not ready: those ready when it was
		// marked, and any whose Ready arrives since (a status written late,
		// or seen late by this controller's cache), as Kubernetes' controller
		// marks a pod updated on a node that is not ready. A board gossip
		// shows alive again is left to report its own.
		if kit.NodeReadyStatus(n) == corev1.ConditionUnknown && !alive[n.Name] {
			c.markPodsNotReady(ctx, pods, n.Name, now)
		}
		c.syncTaints(ctx, nodes, n, now)
		if n.Spec.PodCIDR == "" {
			c.assignPodCIDR(ctx, nodes, n.Name, used)
		}
		if kit.NodeReadyStatus(n) != corev1.ConditionTrue {
			notReady++
		}
	}
	if d := disruptionOf(notReady, len(items)); d != c.disruption {
		switch {
		case d == disruptionFull || d == disruptionPartial && len(items) <= largeCluster:
			c.log.Warn("nodelifecycle: most nodes lost at once; evictions held", "disruption", d, "notReady", notReady, "nodes", len(items))
		case d == disruptionPartial:
			c.log.Warn("nodelifecycle: most nodes lost at once; evictions slowed", "disruption", d, "notReady", notReady, "nodes", len(items), "interval", evictionInterval)
		default:
			// Boards coming back one by one get a grace, as after a
			// takeover, before the tolerations of the lost count.
			c.resumed = now.Add(c.cfg.Grace)
			c.log.Info("nodelifecycle: evictions resumed", "notReady", notReady, "nodes", len(items), "tolerationsFrom", c.resumed)
		}
		c.disruption = d
	}
	c.evict(ctx, pods, items, heldUntil, alive, now)
}

// markUnknown sets every condition of the Node to Unknown, as Kubernetes'
// node lifecycle controller does when the kubelet stops posting status.
func (c *Controller) markUnknown(ctx context.Context, nodes *registry.Resource, name, msg string, now time.Time) *corev1.Node {
	obj, err := c.store.Mutate(ctx, nodes, "", name, "status", func(obj runtime.Object) error {
		n := obj.(*corev1.Node)
		t := metav1.NewTime(now)
		ready := false
		for i := range n.Status.Conditions {
			cd := &n.Status.Conditions[i]
			if cd.Status != corev1.ConditionUnknown {
				cd.LastTransitionTime = t
			}
			cd.Status, cd.Reason = corev1.ConditionUnknown, reasonUnknown
			cd.Message = conditionsReason
			if cd.Type == corev1.NodeReady {
				cd.Message, ready = msg, true
			}
		}
		if !ready {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
				Reason: reasonUnknown, Message: msg, LastHeartbeatTime: t, LastTransitionTime: t})
		}
		return nil
	})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			c.log.Warn("nodelifecycle: mark node unknown", "node", name, "err", err)
		}
		return nil
	}
	c.log.Warn("nodelifecycle: node not ready", "node", name, "why", msg)
	return obj.(*corev1.Node)
}

// markPodsNotReady sets the Ready condition of the pods on a lost board to
// False, as Kubernetes does: their containers may be running, but nobody
// can reach them, so Services stop sending them traffic and controllers
// stop counting them as available.
func (c *Controller) markPodsNotReady(ctx context.Context, pods *registry.Resource, node string, now time.Time) {
	for _, p := range c.pods.matching([]string{node}, func(p *boundPod) bool { return p.ready }) {
		_, err := c.store.Mutate(ctx, pods, p.namespace, p.name, "status", func(obj runtime.Object) error {
			pod := obj.(*corev1.Pod)
			for j := range pod.Status.Conditions {
				if cd := &pod.Status.Conditions[j]; cd.Type == corev1.PodReady && cd.Status == corev1.ConditionTrue {
					cd.Status, cd.LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(now)
				}
			}
			return nil
		})
		if err != nil && !apierrors.IsNotFound(err) {
			c.log.Warn("nodelifecycle: mark a pod not ready", "pod", p.key(), "err", err)
		}
	}
}

// wantTaints are the NoSchedule and NoExecute taints a Node's Ready
// condition calls for: unreachable when Unknown, not-ready when False.
func wantTaints(n *corev1.Node) string {
	switch kit.NodeReadyStatus(n) {
	case corev1.ConditionUnknown:
		return corev1.TaintNodeUnreachable
	case corev1.ConditionFalse:
		return corev1.TaintNodeNotReady
	}
	return ""
}

func (c *Controller) syncTaints(ctx context.Context, nodes *registry.Resource, n *corev1.Node, now time.Time) {
	want := wantTaints(n)
	if taintsMatch(n.Spec.Taints, want) {
		return
	}
	_, err := c.store.Mutate(ctx, nodes, "", n.Name, "", func(obj runtime.Object) error {
		cur := obj.(*corev1.Node)
		want := wantTaints(cur)
		if taintsMatch(cur.Spec.Taints, want) {
			return nil
		}
		cur.Spec.Taints = slices.DeleteFunc(cur.Spec.Taints, func(t corev1.Taint) bool {
			return (t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady) && t.Key != want
		})
		for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute} {
			if want != "" && !hasTaint(cur.Spec.Taints, want, effect) {
				added := metav1.NewTime(now)
				cur.Spec.Taints = append(cur.Spec.Taints, corev1.Taint{Key: want, Effect: effect, TimeAdded: &added})
			}
		}
		return nil
	})
	if err != nil && !apierrors.IsNotFound(err) {
		c.log.Warn("nodelifecycle: taint node", "node", n.Name, "err", err)
		return
	}
	if want == "" {
		c.log.Info("nodelifecycle: node ready again; taints removed", "node", n.Name)
	} else {
		c.log.Info("nodelifecycle: node tainted", "node", n.Name, "taint", want)
	}
}

// taintsMatch reports whether the lifecycle taints are exactly want's.
func taintsMatch(ts []corev1.Taint, want string) bool {
	for _, t := range ts {
		if (t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady) && t.Key != want {
			return false
		}
	}
	return want == "" || hasTaint(ts, want, corev1.TaintEffectNoSchedule) && hasTaint(ts, want, corev1.TaintEffectNoExecute)
}

func hasTaint(ts []corev1.Taint, key string, effect corev1.TaintEffect) bool {
	return slices.ContainsFunc(ts, func(t corev1.Taint) bool { return t.Key == key && t.Effect == effect })
}

// assignPodCIDR gives the Node the first free block of the pod range.
func (c *Controller) assignPodCIDR(ctx context.Context, nodes *registry.Resource, name string, used map[netip.Prefix]bool) {
	block, ok := freeBlock(c.cfg.PodCIDR, c.cfg.PodCIDRBits, used)
	if !ok {
		c.log.Error("nodelifecycle: the pod range is full; node gets no pod CIDR", "node", name, "range", c.cfg.PodCIDR)
		return
	}
	_, err := c.store.Mutate(ctx, nodes, "", name, "", func(obj runtime.Object) error {
		n := obj.(*corev1.Node)
		if n.Spec.PodCIDR != "" {
			return nil
		}
		n.Spec.PodCIDR, n.Spec.PodCIDRs = block.String(), []string{block.String()}
		return nil
	})
	if err != nil {
		c.log.Warn("nodelifecycle: assign pod CIDR", "node", name, "err", err)
		return
	}
	used[block] = true
	c.log.Info("nodelifecycle: pod CIDR assigned", "node", name, "cidr", block)
}

// freeBlock is the first /bits block of r not in used.
func freeBlock(r netip.Prefix, bits int, used map[netip.Prefix]bool) (netip.Prefix, bool) {
	if bits < r.Bits() || bits > r.Addr().BitLen() || bits-r.Bits() > 16 {
		return netip.Prefix{}, false
	}
	step := r.Addr().BitLen() - bits
	for i := 0; i < 1<<(bits-r.Bits()); i++ {
		a := r.Masked().Addr().As16()
		// Add i << step to the address, big-endian, in its last 16 bytes.
		carry := uint32(i) << (step % 8)
		for j := 15 - step/8; j >= 0 && carry > 0; j-- {
			sum := uint32(a[j]) + carry&0xff
			a[j] = byte(sum)
			carry = carry>>8 + sum>>8
		}
		addr := netip.AddrFrom16(a)
		if r.Addr().Is4() {
			addr = addr.Unmap()
		}
		p := netip.PrefixFrom(addr, bits)
		if !used[p] {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// evict deletes pods bound to Nodes with NoExecute taints they do not
// tolerate, at once or when their tolerationSeconds have run out, so their
// controllers make them again on other boards; not for the unreachable
// taint of a board alive in gossip. Tolerations count from the
// taint, or from when a hold ended (heldUntil, c.resumed) if later. In a
// disruption it evicts nothing, or, in a large cluster, one Node's pods at
// a time.
func (c *Controller) evict(ctx context.Context, pods *registry.Resource, nodes []corev1.Node, heldUntil map[string]time.Time, alive map[string]bool, now time.Time) {
	if c.disruption == disruptionFull || c.disruption == disruptionPartial && len(nodes) <= largeCluster {
		return
	}
	onlyOne := c.disruption == disruptionPartial
	if onlyOne && now.Sub(c.evictedAt) < evictionInterval {
		return
	}
	tainted := map[string][]corev1.Taint{}
	for i := range nodes {
		for _, t := range nodes[i].Spec.Taints {
			if t.Effect == corev1.TaintEffectNoExecute && !(t.Key == corev1.TaintNodeUnreachable && alive[nodes[i].Name]) {
				tainted[nodes[i].Name] = append(tainted[nodes[i].Name], t)
			}
		}
	}
	if len(tainted) == 0 {
		return
	}
	due := c.pods.matching(slices.Collect(maps.Keys(tainted)), func(p *boundPod) bool {
		if p.terminating {
			return false
		}
		from := c.resumed
		if h := heldUntil[p.node]; h.After(from) {
			from = h
		}
		at, evict := evictionTime(p.tolerations, tainted[p.node], from)
		return evict && !now.Before(at)
	})
	chosen := ""
	for _, p := range due {
		if chosen != "" && p.node != chosen {
			continue
		}
		if onlyOne {
			chosen, c.evictedAt = p.node, now
		}
		if _, _, err := c.store.Delete(ctx, pods, p.namespace, p.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.uid}}); err != nil {
			if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				c.log.Warn("nodelifecycle: evict pod", "pod", p.key(), "err", err)
			}
			continue
		}
		c.log.Info("nodelifecycle: pod evicted from a tainted node", "pod", p.key(), "node", p.node)
	}
}

// evictionTime is when a pod with tolerations must leave a node with the
// NoExecute taints: at once for an untolerated taint, after the shortest
// tolerationSeconds otherwise, counted from the taint or from if later;
// evict is false if it may stay for good.
func evictionTime(tolerations []corev1.Toleration, taints []corev1.Taint, from time.Time) (at time.Time, evict bool) {
	for _, t := range taints {
		added := from
		if t.TimeAdded != nil && t.TimeAdded.After(from) {
			added = t.TimeAdded.Time
		}
		var best *corev1.Toleration
		for i := range tolerations {
			if tolerations[i].ToleratesTaint(logr.Discard(), &t, false) {
				if best == nil || tolerations[i].TolerationSeconds == nil ||
					best.TolerationSeconds != nil && *tolerations[i].TolerationSeconds > *best.TolerationSeconds {
					best = &tolerations[i]
				}
			}
		}
		var due time.Time
		switch {
		case best == nil:
			due = added
		case best.TolerationSeconds == nil:
			continue
		default:
			due = added.Add(time.Duration(max(*best.TolerationSeconds, 0)) * time.Second)
		}
		if !evict || due.Before(at) {
			at, evict = due, true
		}
	}
	return at, evict
}
