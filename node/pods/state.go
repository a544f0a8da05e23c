package pods

import (
	"encoding/json"
	"hash/fnv"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/node/containers"
)

// Labels on containerd containers: which pod and container they are, and
// which attempt (the restart count).
const (
	labelPodUID       = "isle.dev/pod-uid"
	labelPodNamespace = "isle.dev/pod-namespace"
	labelPodName      = "isle.dev/pod-name"
	labelContainer    = "isle.dev/container"
	labelAttempt      = "isle.dev/attempt"
	labelInit         = "isle.dev/init"
	labelHash         = "isle.dev/spec-hash"
	labelHostNetwork  = "isle.dev/host-network"
	labelImageID      = "isle.dev/image-id"
)

func hostNetworkLabel(l map[string]string) bool { return l[labelHostNetwork] == "true" }

// podState is what the Manager knows of one pod beyond its object: its
// containers as containerd reported them last, why a container waits, its
// back-offs and probes. Only the pod's sync touches it, except the probe
// results (mu).
type podState struct {
	uid types.UID

	mu sync.Mutex
	// namespace and name of the pod (names, setNames).
	namespace, name string
	ctrs            map[string]containers.Container // by containerd ID
	// probes by container ID, their results kept in them.
	probes map[string]*probeSet

	netns string
	ips   []string
	// attached: the sandbox's namespace, network and files are made (by
	// this agent process).
	attached bool
	// waiting says why a container (by name) is not running.
	waiting   map[string]corev1.ContainerStateWaiting
	backoff   map[string]*backoff
	startTime *metav1.Time
	// terminating: the pod is being stopped (its goroutine runs).
	terminating atomic.Bool
	// podFailed: restartPolicy Never and an init container failed, or the
	// pod outlived its activeDeadlineSeconds; failReason and failMessage
	// are the pod's status.reason and message then, if any.
	podFailed               bool
	failReason, failMessage string
	// killing: the containers of a pod failed by its deadline are being
	// stopped.
	killing atomic.Bool
}

func newPodState(uid types.UID, namespace, name string) *podState {
	return &podState{uid: uid, namespace: namespace, name: name, ctrs: map[string]containers.Container{},
		probes: map[string]*probeSet{}, waiting: map[string]corev1.ContainerStateWaiting{}, backoff: map[string]*backoff{}}
}

// setNames records the pod's namespace and name (a pod found on disk
// has none until the API names it).
func (ps *podState) setNames(namespace, name string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.namespace, ps.name = namespace, name
}

// names are the pod's namespace and name ("" while unknown).
func (ps *podState) names() (namespace, name string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.namespace, ps.name
}

// key is namespace/name for messages.
func (ps *podState) key() string {
	ns, name := ps.names()
	return ns + "/" + name
}

// attempts are a container's containerd containers, newest first.
func (ps *podState) attempts(name string, init bool) []containers.Container {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []containers.Container
	for _, c := range ps.ctrs {
		if c.Labels[labelContainer] == name && (c.Labels[labelInit] == "true") == init {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return attempt(out[i]) > attempt(out[j]) })
	return out
}

func (ps *podState) current(name string, init bool) *containers.Container {
	if a := ps.attempts(name, init); len(a) > 0 {
		return &a[0]
	}
	return nil
}

func (ps *podState) setContainer(c containers.Container) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.ctrs[c.ID] = c
}

func (ps *podState) dropContainer(id string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.ctrs, id)
}

func (ps *podState) all() []containers.Container {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make([]containers.Container, 0, len(ps.ctrs))
	for _, c := range ps.ctrs {
		out = append(out, c)
	}
	return out
}

func attempt(c containers.Container) int {
	n, _ := strconv.Atoi(c.Labels[labelAttempt])
	return n
}

// specHash identifies a container's spec: a pod whose container changed
// (a new image) gets that container restarted.
func specHash(c *corev1.Container) string {
	b, _ := json.Marshal(struct {
		Image, WorkingDir string
		Command, Args     []string
		Env               []corev1.EnvVar
		EnvFrom           []corev1.EnvFromSource
		Mounts            []corev1.VolumeMount
		Ports             []corev1.ContainerPort
	}{c.Image, c.WorkingDir, c.Command, c.Args, c.Env, c.EnvFrom, c.VolumeMounts, c.Ports})
	h := fnv.New64a()
	_, _ = h.Write(b)
	return strconv.FormatUint(h.Sum64(), 16)
}

// backoff is Kubernetes' restart back-off of one container: restart at
// once the first time, then wait 10 s, doubling to 5 min; a container
// that ran 10 min resets it.
type backoff struct {
	delay time.Duration
	until time.Time
}

const (
	backoffInitial = 10 * time.Second
	backoffMax     = 5 * time.Minute
	backoffReset   = 2 * backoffMax
)

// next is called when the container is restarted at now, having last run
// for ran; it returns the delay the next restart must wait.
func (b *backoff) next(now time.Time, ran time.Duration) {
	switch {
	case b.delay == 0 || ran >= backoffReset:
		b.delay = backoffInitial
	default:
		b.delay = min(2*b.delay, backoffMax)
	}
	b.until = now.Add(b.delay)
}
