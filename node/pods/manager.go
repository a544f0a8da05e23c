package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/isle-cluster/isle/node/containers"
	"github.com/isle-cluster/isle/node/logs"
	"github.com/isle-cluster/isle/node/volumes"
)

// Runtime is what the Manager needs of containerd (containers.Runtime).
type Runtime interface {
	EnsureImage(ctx context.Context, image string, policy corev1.PullPolicy, creds containers.Credentials) (containers.Image, error)
	Create(ctx context.Context, s containers.Spec) error
	Start(ctx context.Context, id string) error
	Stop(ctx context.Context, id string, grace time.Duration) error
	Remove(ctx context.Context, id string) error
	Containers(ctx context.Context) ([]containers.Container, error)
	Inspect(ctx context.Context, id string) (containers.Container, error)
	Reattach(ctx context.Context, id string) error
	ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (int, []byte, error)
	Exits() <-chan string
}

// Network gives a pod's network namespace its network. The Pod network
// (bridge, veth, addresses, routes) implements it; LoopbackOnly stands in
// until then.
type Network interface {
	// Attach sets up the network of the pod in the namespace at netnsPath
	// (idempotent) and returns the pod's IPs.
	Attach(ctx context.Context, pod *corev1.Pod, netnsPath string) ([]string, error)
	// Detach removes what Attach made for the pod (also after a restart:
	// from what is on the board, not from memory).
	Detach(ctx context.Context, uid types.UID, netnsPath string) error
}

// LoopbackOnly is a Network of loopback alone: pods reach each other only
// through the board (hostNetwork) and have no pod IP.
type LoopbackOnly struct{}

// Attach does nothing: the namespace already has its loopback up.
func (LoopbackOnly) Attach(context.Context, *corev1.Pod, string) ([]string, error) { return nil, nil }

// Detach does nothing.
func (LoopbackOnly) Detach(context.Context, types.UID, string) error { return nil }

// Config configures a Manager.
type Config struct {
	NodeName string
	// NodeIP is the board's address: hostIP, and the pod IP of
	// hostNetwork pods.
	NodeIP string
	// Client is a core/v1 REST client of the board (node credential).
	Client *rest.RESTClient
	// Services is an informer of all the cluster's Services, for the
	// variables of each container's environment; its owner runs it (the
	// agent's Service traffic reads the same one).
	Services cache.SharedIndexInformer
	Runtime  Runtime
	// Network; nil: LoopbackOnly.
	Network Network
	// DataDir is the agent's data directory: pods' volumes go under
	// DataDir/pods, their logs under DataDir/logs.
	DataDir string
	// RunDir holds what does not outlive a reboot (network namespaces);
	// default /run/isle.
	RunDir string
	// Allocatable is the Node's allocatable: the limits of containers
	// without limits, as the downward API sees them.
	Allocatable corev1.ResourceList
	// ResolvConf is the board's resolver configuration, the base of each
	// pod's /etc/resolv.conf (all of it with dnsPolicy Default); default
	// /etc/resolv.conf.
	ResolvConf string
	// ClusterDNS is the cluster DNS's address, the nameserver of pods with
	// dnsPolicy ClusterFirst, and ClusterDomain the cluster's domain. No
	// ClusterDNS: every pod gets the board's resolvers (as Default).
	ClusterDNS    netip.Addr
	ClusterDomain string
	// Resync is how often every pod is synced without a cause (configMap
	// and secret changes reach volumes then); default 60 s.
	Resync time.Duration
	// Workers sync pods in parallel; default 4.
	Workers int
	// CgroupParent holds the pods' cgroups (CgroupParent/pod<uid>);
	// default /isle.
	CgroupParent string
	// LogMaxSize and LogMaxFiles rotate container logs; defaults 10 MiB
	// and 3 files.
	LogMaxSize  int64
	LogMaxFiles int
	Logger      *slog.Logger
	// Unreachable reports whether an error of the API client is its
	// servers being unreachable, which the caller logs once per change
	// (the agent's servers): the pods' retries of it are debug lines.
	// Nil: no error is.
	Unreachable func(error) bool
	// Activity, if set, is called when a container starts or is stopped
	// (the board's activity LED flashes); it must not block.
	Activity func()
}

// retryLevel is the level of a failure that is retried: debug if the API
// servers are unreachable (Unreachable), warn otherwise.
func (c *Config) retryLevel(err error) slog.Level {
	if c.Unreachable != nil && c.Unreachable(err) {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

func (c *Config) validate() error {
	switch {
	case c.NodeName == "":
		return errors.New("pods: no node name")
	case c.Client == nil:
		return errors.New("pods: no API client")
	case c.Services == nil:
		return errors.New("pods: no Service informer")
	case c.Runtime == nil:
		return errors.New("pods: no runtime")
	case c.DataDir == "":
		return errors.New("pods: no data directory")
	}
	if c.Network == nil {
		c.Network = LoopbackOnly{}
	}
	if c.RunDir == "" {
		c.RunDir = "/run/isle"
	}
	if c.ResolvConf == "" {
		c.ResolvConf = "/etc/resolv.conf"
	}
	if c.Resync <= 0 {
		c.Resync = time.Minute
	}
	if c.CgroupParent == "" {
		c.CgroupParent = "/isle"
	}
	if !path.IsAbs(c.CgroupParent) || path.Clean(c.CgroupParent) != c.CgroupParent {
		return fmt.Errorf("pods: cgroup parent %q: want a clean absolute path such as /isle", c.CgroupParent)
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.LogMaxSize <= 0 {
		c.LogMaxSize = 10 << 20
	}
	if c.LogMaxFiles <= 0 {
		c.LogMaxFiles = 3
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// OpenLog opens a container log file as the runtime writes it (CRI format,
// rotated by size): the containers.Config's OpenLog. Zero values take the
// defaults: 10 MiB, 3 files.
func OpenLog(maxSize int64, maxFiles int) func(path string) (containers.LogFile, error) {
	if maxSize <= 0 {
		maxSize = 10 << 20
	}
	if maxFiles <= 0 {
		maxFiles = 3
	}
	return func(path string) (containers.LogFile, error) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		return logs.NewWriter(path, maxSize, maxFiles, nil)
	}
}

// Manager runs the board's pods.
type Manager struct {
	cfg    Config
	rt     Runtime
	vol    *volumes.Manager
	log    *slog.Logger
	events *recorder
	status *statusWriter
	usage  usage
	queue  workqueue.TypedDelayingInterface[types.UID]
	pods   cache.Indexer
	// services feeds the Service variables of containers' environments
	// (Config.Services).
	services cache.SharedIndexInformer

	mu    sync.Mutex
	state map[types.UID]*podState
}

// New makes a Manager.
func New(cfg Config) (*Manager, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, rt: cfg.Runtime, log: cfg.Logger, state: map[types.UID]*podState{},
		queue: workqueue.NewTypedDelayingQueue[types.UID](), services: cfg.Services}
	vol, err := volumes.New(volumes.Config{PodsDir: filepath.Join(cfg.DataDir, "pods"), NodeName: cfg.NodeName,
		Allocatable: cfg.Allocatable, Sources: apiSources{cfg.Client, m.services}, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("pods: %w", err)
	}
	m.vol = vol
	m.events = newRecorder(cfg.Client, cfg.NodeName, cfg.Logger)
	m.status = newStatusWriter(cfg.Client, cfg.Logger)
	m.status.retryLevel = cfg.retryLevel
	m.status.bound = func(uid types.UID) bool { return m.pods == nil || m.pod(uid) != nil }
	return m, nil
}

// byUID indexes the informer's pods by UID.
const byUID = "uid"

// Run runs the board's pods until ctx ends; the pods keep running after.
func (m *Manager) Run(ctx context.Context) error {
	lw := cache.NewListWatchFromClient(m.cfg.Client, "pods", "", fields.OneTermEqualSelector("spec.nodeName", m.cfg.NodeName))
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{byUID: func(obj any) ([]string, error) {
		return []string{string(obj.(*corev1.Pod).UID)}, nil
	}})
	if err := inf.SetTransform(WithoutManagedFields); err != nil {
		return fmt.Errorf("pods: watch pods: %w", err)
	}
	m.pods = inf.GetIndexer()
	enqueue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			m.queue.Add(p.UID)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue,
		UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue}); err != nil {
		return fmt.Errorf("pods: watch pods: %w", err)
	}
	if err := m.adopt(ctx); err != nil {
		return err
	}
	go inf.Run(ctx.Done())
	go m.status.run(ctx)
	go m.events.run(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil
	}
	// Pods adopted but no longer bound here were deleted while the agent
	// was down; pods on disk without containers too.
	m.mu.Lock()
	for uid := range m.state {
		m.queue.Add(uid)
	}
	m.mu.Unlock()
	if uids, err := m.vol.PodsOnDisk(); err == nil {
		for _, uid := range uids {
			m.queue.Add(uid)
		}
	}
	go m.followExits(ctx)
	go m.cleanLocalPaths(ctx)
	if gc, ok := m.rt.(ImageCollector); ok {
		go m.collectImages(ctx, gc)
	}
	go m.resync(ctx)
	var wg sync.WaitGroup
	for range m.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m.work(ctx) {
			}
		}()
	}
	<-ctx.Done()
	m.queue.ShutDown()
	wg.Wait()
	m.stopAllProbes()
	return nil
}

func (m *Manager) work(ctx context.Context) bool {
	uid, quit := m.queue.Get()
	if quit {
		return false
	}
	defer m.queue.Done(uid)
	if err := m.sync(ctx, uid); err != nil && ctx.Err() == nil {
		m.log.Log(ctx, m.cfg.retryLevel(err), "pods: sync", "pod", m.nameOf(uid), "err", err)
		m.queue.AddAfter(uid, 2*time.Second)
	}
	return true
}

// followExits syncs the pod of each container that exited.
func (m *Manager) followExits(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-m.rt.Exits():
			if id == containers.Resync {
				m.enqueueAll()
				continue
			}
			if uid, ok := m.podOfContainer(id); ok {
				m.queue.Add(uid)
			}
		}
	}
}

func (m *Manager) resync(ctx context.Context) {
	t := time.NewTicker(m.cfg.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.enqueueAll()
		}
	}
}

func (m *Manager) enqueueAll() {
	for _, obj := range m.pods.List() {
		m.queue.Add(obj.(*corev1.Pod).UID)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid := range m.state {
		m.queue.Add(uid)
	}
}

// pod is the informer's pod of uid, nil when the board has none.
func (m *Manager) pod(uid types.UID) *corev1.Pod {
	objs, err := m.pods.ByIndex(byUID, string(uid))
	if err != nil || len(objs) == 0 {
		return nil
	}
	return objs[0].(*corev1.Pod)
}

func (m *Manager) nameOf(uid types.UID) string {
	if p := m.pod(uid); p != nil {
		return p.Namespace + "/" + p.Name
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if ps := m.state[uid]; ps != nil {
		return ps.key()
	}
	return string(uid)
}

func (m *Manager) podOfContainer(id string) (types.UID, bool) {
	m.mu.Lock()
	states := make([]*podState, 0, len(m.state))
	for _, ps := range m.state {
		states = append(states, ps)
	}
	m.mu.Unlock()
	for _, ps := range states {
		ps.mu.Lock()
		_, ok := ps.ctrs[id]
		ps.mu.Unlock()
		if ok {
			return ps.uid, true
		}
	}
	return "", false
}

// adopt takes up what containerd runs for this board: the state of each
// pod is rebuilt from its containers' labels, and running containers'
// output is reattached.
func (m *Manager) adopt(ctx context.Context) error {
	cs, err := m.rt.Containers(ctx)
	if err != nil {
		return fmt.Errorf("pods: adopt containers: %w", err)
	}
	n := 0
	for _, c := range cs {
		uid := types.UID(c.Labels[labelPodUID])
		if uid == "" {
			continue // not a pod's
		}
		ps := m.stateOf(uid, c.Labels[labelPodNamespace], c.Labels[labelPodName])
		if c.State == containers.Running {
			if err := m.rt.Reattach(ctx, c.ID); err != nil {
				m.log.Warn("pods: reattach", "container", c.ID, "err", err)
			}
			n++
		}
		ps.ctrs[c.ID] = c
		if !hostNetworkLabel(c.Labels) {
			ps.netns = m.netnsPath(uid)
		}
	}
	if len(cs) > 0 {
		m.log.Info("pods: adopted containers", "containers", len(cs), "running", n, "pods", len(m.state))
	}
	return nil
}

func (m *Manager) stateOf(uid types.UID, namespace, name string) *podState {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.state[uid]
	if ps == nil {
		ps = newPodState(uid, namespace, name)
		m.state[uid] = ps
	}
	return ps
}

func (m *Manager) netnsPath(uid types.UID) string {
	return filepath.Join(m.cfg.RunDir, "netns", string(uid))
}

// podCgroup is the cgroup of the pod's containers.
func (m *Manager) podCgroup(uid types.UID) string {
	return path.Join(m.cfg.CgroupParent, "pod"+string(uid))
}
