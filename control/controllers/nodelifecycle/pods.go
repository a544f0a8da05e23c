package nodelifecycle

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// watchRetry is how long a pod watch that failed or ended waits before it
// is opened again.
const watchRetry = time.Second

// boundPod is what the controller keeps of a pod bound to a Node: what
// eviction, the pod garbage collection and marking pods not ready read.
type boundPod struct {
	namespace, name string
	uid             types.UID
	node            string
	terminating     bool
	ready           bool
	tolerations     []corev1.Toleration
}

func (p *boundPod) key() string { return p.namespace + "/" + p.name }

// podIndex is the bound pods by Node, kept by a watch of every pod, as
// Kubernetes' taint eviction reads an informer's: listing the pods from
// the store decoded every pod of the cluster, and eviction did it at each
// resync while any Node had a NoExecute taint, even with nothing due
// (with 50 lost boards and 1,000 pods, most of an idle server's CPU).
type podIndex struct {
	mu sync.Mutex
	// synced: the watch's initial events (every pod) have all come.
	synced bool
	byNode map[string]map[string]*boundPod // Node → pod key → pod
	nodeOf map[string]string               // pod key → Node
}

func newPodIndex() *podIndex {
	return &podIndex{byNode: map[string]map[string]*boundPod{}, nodeOf: map[string]string{}}
}

// follow keeps x with a watch of pods, opened again whenever it ends,
// until ctx ends.
func (x *podIndex) follow(ctx context.Context, store Store, pods *registry.Resource, log *slog.Logger) {
	yes := true
	for ctx.Err() == nil {
		events, err := store.Watch(ctx, pods, "", metav1.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}, registry.WithoutManagedFields())
		if err != nil {
			log.Warn("nodelifecycle: watch pods failed; retrying", "err", err)
			kit.Sleep(ctx, watchRetry)
			continue
		}
		for ev := range events {
			x.apply(ev)
		}
		x.reset() // until the next watch has brought every pod again
		if ctx.Err() == nil {
			log.Info("nodelifecycle: pod watch ended; opening it again")
			kit.Sleep(ctx, watchRetry)
		}
	}
}

// reset empties x when its watch ends: until the initial events of the
// next have come, x is not synced.
func (x *podIndex) reset() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.synced = false
	clear(x.byNode)
	clear(x.nodeOf)
}

// apply records one event of the pod watch.
func (x *podIndex) apply(ev registry.WatchEvent) {
	if ev.Type == watch.Bookmark {
		if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			x.mu.Lock()
			x.synced = true
			x.mu.Unlock()
		}
		return
	}
	p, ok := ev.Object.(*corev1.Pod)
	if !ok {
		return // an ERROR event: the watch ends next
	}
	key := p.Namespace + "/" + p.Name
	x.mu.Lock()
	defer x.mu.Unlock()
	if node, ok := x.nodeOf[key]; ok {
		delete(x.byNode[node], key)
		if len(x.byNode[node]) == 0 {
			delete(x.byNode, node)
		}
		delete(x.nodeOf, key)
	}
	if ev.Type == watch.Deleted || p.Spec.NodeName == "" {
		return
	}
	// The watch's objects are shared: copy what is kept, and nothing
	// that would hold the whole pod.
	bp := &boundPod{namespace: p.Namespace, name: p.Name, uid: p.UID, node: p.Spec.NodeName,
		terminating: p.DeletionTimestamp != nil, ready: kit.PodReady(p), tolerations: slices.Clone(p.Spec.Tolerations)}
	if x.byNode[bp.node] == nil {
		x.byNode[bp.node] = map[string]*boundPod{}
	}
	x.byNode[bp.node][key] = bp
	x.nodeOf[key] = bp.node
}

// ready reports whether x holds every pod (its watch's initial events
// have come).
func (x *podIndex) ready() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.synced
}

// matching is the pods on the Nodes in nodes (nil: on any Node) for which
// keep is true, by key; keep is called with x locked.
func (x *podIndex) matching(nodes []string, keep func(*boundPod) bool) []boundPod {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []boundPod
	add := func(ps map[string]*boundPod) {
		for _, p := range ps {
			if keep(p) {
				out = append(out, *p)
			}
		}
	}
	if nodes == nil {
		for _, ps := range x.byNode {
			add(ps)
		}
	}
	for _, n := range nodes {
		add(x.byNode[n])
	}
	slices.SortFunc(out, func(a, b boundPod) int { return cmp.Compare(a.key(), b.key()) })
	return out
}
