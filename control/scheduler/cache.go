package scheduler

import (
	"maps"
	"slices"
	"strings"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Requests of containers that ask for none, as kube-scheduler counts them
// when it scores (not when it filters): 0.1 CPU and 200 MiB.
const (
	defaultMilliCPURequest = 100
	defaultMemoryRequest   = 200 << 20
)

// scoringDefaults stand in for the requests a container does not make.
var scoringDefaults = corev1.ResourceList{
	corev1.ResourceCPU:    *resource.NewMilliQuantity(defaultMilliCPURequest, resource.DecimalSI),
	corev1.ResourceMemory: *resource.NewQuantity(defaultMemoryRequest, resource.BinarySI),
}

// resources is an amount of each resource, in the units kube-scheduler
// compares: millicores, bytes, and the value of other (scalar) resources.
type resources struct {
	milliCPU, memory, ephemeral int64
	scalar                      map[corev1.ResourceName]int64
}

func (r *resources) add(o resources, sign int64) {
	r.milliCPU += sign * o.milliCPU
	r.memory += sign * o.memory
	r.ephemeral += sign * o.ephemeral
	for name, v := range o.scalar {
		if r.scalar == nil {
			r.scalar = map[corev1.ResourceName]int64{}
		}
		r.scalar[name] += sign * v
	}
}

// toResources converts a resource list; pods, the count of pods, is not
// a resource a pod requests and is left out.
func toResources(list corev1.ResourceList) resources {
	var r resources
	for name, q := range list {
		switch name {
		case corev1.ResourceCPU:
			r.milliCPU = q.MilliValue()
		case corev1.ResourceMemory:
			r.memory = q.Value()
		case corev1.ResourceEphemeralStorage:
			r.ephemeral = q.Value()
		case corev1.ResourcePods:
		default:
			if r.scalar == nil {
				r.scalar = map[corev1.ResourceName]int64{}
			}
			r.scalar[name] = q.Value()
		}
	}
	return r
}

// hostPort is one host port a pod's container asks for.
type hostPort struct {
	ip       string // "0.0.0.0" for all addresses
	protocol corev1.Protocol
	port     int32
}

// podInfo is what the scheduler keeps of a pod: its requests, computed
// once, as kube-scheduler computes them (containers summed, the largest
// init container if larger, sidecars added, overhead added).
type podInfo struct {
	key  string
	pod  *corev1.Pod
	node string // where it runs, or is assumed to
	// requests is what the pod asks for; nonZeroCPU and nonZeroMem count
	// containers without requests at the scoring defaults.
	requests               resources
	nonZeroCPU, nonZeroMem int64
	ports                  []hostPort
	owner                  types.UID // the controller's UID, if any
	affinity               *podAffinity
	// assumed: placed by this scheduler, not yet seen bound in the store;
	// binding: its bind is under way.
	assumed, binding bool
}

func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

func newPodInfo(pod *corev1.Pod) *podInfo {
	p := &podInfo{key: podKey(pod), pod: pod, node: pod.Spec.NodeName,
		requests: toResources(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})),
		ports:    podHostPorts(pod)}
	nonZero := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{NonMissingContainerRequests: scoringDefaults})
	p.nonZeroCPU, p.nonZeroMem = nonZero.Cpu().MilliValue(), nonZero.Memory().Value()
	if ref := metav1.GetControllerOf(pod); ref != nil {
		p.owner = ref.UID
	}
	p.affinity = newPodAffinity(pod)
	return p
}

// podHostPorts lists the host ports of a pod's containers and sidecars.
func podHostPorts(pod *corev1.Pod) []hostPort {
	var out []hostPort
	add := func(c *corev1.Container) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			hp := hostPort{ip: p.HostIP, protocol: p.Protocol, port: p.HostPort}
			if hp.ip == "" {
				hp.ip = "0.0.0.0"
			}
			if hp.protocol == "" {
				hp.protocol = corev1.ProtocolTCP
			}
			out = append(out, hp)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	return out
}

// nodeInfo is a node and what the pods placed on it take.
type nodeInfo struct {
	name string
	// node is nil once the Node is deleted while pods still count on it.
	node        *corev1.Node
	allocatable resources
	allowedPods int64
	// taints are the node's NoSchedule and NoExecute taints, with the one
	// Kubernetes' node lifecycle controller adds to a node that is not
	// Ready (see readinessTaint).
	taints []corev1.Taint

	pods                   map[string]*podInfo
	requested              resources
	nonZeroCPU, nonZeroMem int64
	ports                  map[hostPort]int
	owners                 map[types.UID]int
	// affine are the node's pods with inter-pod affinity terms.
	affine map[string]*podInfo
	// images are the sizes of the images the node has (status.images),
	// by each of their names.
	images map[string]int64
	// nominated are the pending pods nominated to the node by preemption.
	nominated map[string]*podInfo
}

func newNodeInfo(name string) *nodeInfo {
	return &nodeInfo{name: name, pods: map[string]*podInfo{}, ports: map[hostPort]int{}, owners: map[types.UID]int{},
		affine: map[string]*podInfo{}, nominated: map[string]*podInfo{}}
}

// clone is a copy of n whose pods can change apart from n's.
func (n *nodeInfo) clone() *nodeInfo {
	c := *n
	c.pods, c.ports, c.owners, c.affine = maps.Clone(n.pods), maps.Clone(n.ports), maps.Clone(n.owners), maps.Clone(n.affine)
	c.requested = resources{}
	c.requested.add(n.requested, 1)
	return &c
}

// setNode records the node's object and reports whether anything the
// scheduler decides on changed: what was unschedulable may fit now.
func (n *nodeInfo) setNode(node *corev1.Node) bool {
	old := n.node
	n.node = node
	n.allocatable = toResources(node.Status.Allocatable)
	n.allowedPods = node.Status.Allocatable.Pods().Value()
	n.taints = schedulingTaints(node)
	return old == nil ||
		old.Spec.Unschedulable != node.Spec.Unschedulable ||
		!maps.Equal(old.Labels, node.Labels) ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, node.Spec.Taints) ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, node.Status.Allocatable) ||
		readinessTaint(old) != readinessTaint(node)
}

// schedulingTaints are the taints that keep pods off a node.
func schedulingTaints(node *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	if key := readinessTaint(node); key != "" && !slices.ContainsFunc(out, func(t corev1.Taint) bool { return t.Key == key }) {
		out = append(out, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	}
	return out
}

// readinessTaint is the key of the NoSchedule taint Kubernetes' node
// lifecycle controller puts on a node that is not Ready: not-ready when
// the node says it is not, unreachable when its readiness is unknown.
// isle's scheduler applies it itself, so that a node that is not Ready
// takes only pods that tolerate it, with Kubernetes' message.
func readinessTaint(node *corev1.Node) string {
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		switch c.Status {
		case corev1.ConditionTrue:
			return ""
		case corev1.ConditionFalse:
			return corev1.TaintNodeNotReady
		}
	}
	return corev1.TaintNodeUnreachable
}

func (n *nodeInfo) addPod(p *podInfo) {
	n.pods[p.key] = p
	n.requested.add(p.requests, 1)
	n.nonZeroCPU += p.nonZeroCPU
	n.nonZeroMem += p.nonZeroMem
	for _, hp := range p.ports {
		n.ports[hp]++
	}
	if p.owner != "" {
		n.owners[p.owner]++
	}
	if p.affinity != nil {
		n.affine[p.key] = p
	}
}

func (n *nodeInfo) removePod(p *podInfo) {
	delete(n.pods, p.key)
	n.requested.add(p.requests, -1)
	n.nonZeroCPU -= p.nonZeroCPU
	n.nonZeroMem -= p.nonZeroMem
	for _, hp := range p.ports {
		if n.ports[hp]--; n.ports[hp] <= 0 {
			delete(n.ports, hp)
		}
	}
	if p.owner != "" {
		if n.owners[p.owner]--; n.owners[p.owner] <= 0 {
			delete(n.owners, p.owner)
		}
	}
	delete(n.affine, p.key)
}

// nodeImages are the images a node reports, by each of their names.
func nodeImages(node *corev1.Node) map[string]int64 {
	if len(node.Status.Images) == 0 {
		return nil
	}
	out := map[string]int64{}
	for _, image := range node.Status.Images {
		for _, name := range image.Names {
			out[name] = image.SizeBytes
		}
	}
	return out
}

// normalizedImage is an image reference as nodes name their images: in
// full, with the registry and the tag latest when it has neither tag nor
// digest ("nginx" is docker.io/library/nginx:latest). kube-scheduler only
// adds the tag, which misses the full names containerd reports.
func normalizedImage(ref string) string {
	if named, err := reference.ParseDockerRef(ref); err == nil {
		return named.String()
	}
	if strings.LastIndex(ref, ":") <= strings.LastIndex(ref, "/") {
		return ref + ":latest"
	}
	return ref
}

// cache is the scheduler's view of the cluster: nodes, and the pods that
// run on them or are assumed to (placed, binding under way), so that
// consecutive decisions see each other's placements.
type cache struct {
	nodes map[string]*nodeInfo
	// list holds the nodes that exist, for iteration in a stable order.
	list []*nodeInfo
	pods map[string]*podInfo
	// affine counts the pods with inter-pod affinity terms.
	affine int
	// imageNodes counts, per image name, the nodes that have the image.
	imageNodes map[string]int
	// namespaces are the labels of each namespace, for the namespace
	// selectors of inter-pod affinity.
	namespaces map[string]labels.Set
	// services are the selectors of the Services that have one, by
	// namespace and name.
	services map[string]map[string]labels.Set
	// nominations are the nodes pending pods are nominated to.
	nominations map[string]string
	// byLabel and groups index the pods placed (index.go).
	byLabel map[labelPair]map[string]*podInfo
	groups  map[string]*termGroup
}

// defaultSpreadSelector is what kube-scheduler's default spread
// constraints count for pod p: the pods that the Services selecting p
// select (their selectors merged) and, if p's controller is a
// ReplicaSet, StatefulSet or ReplicationController, that its controller
// selects, which isle takes as the pods of that controller. ok is false
// when neither is there: the defaults then count nothing.
func (c *cache) defaultSpreadSelector(p *podInfo) (svc labels.Set, owner types.UID, ok bool) {
	for _, sel := range c.services[p.pod.Namespace] {
		if sel.AsSelectorPreValidated().Matches(labels.Set(p.pod.Labels)) {
			svc = labels.Merge(svc, sel)
		}
	}
	if ref := metav1.GetControllerOfNoCopy(p.pod); ref != nil && spreadOwnerKinds[ref.APIVersion+"/"+ref.Kind] {
		owner = ref.UID
	}
	return svc, owner, len(svc) > 0 || owner != ""
}

// spreadOwnerKinds are the controllers kube-scheduler's default spread
// counts the pods of.
var spreadOwnerKinds = map[string]bool{"apps/v1/ReplicaSet": true, "apps/v1/StatefulSet": true, "v1/ReplicationController": true}

// setService keeps (or with a nil selector forgets) a Service's selector.
func (c *cache) setService(ns, name string, sel labels.Set) {
	if sel == nil {
		delete(c.services[ns], name)
		if len(c.services[ns]) == 0 {
			delete(c.services, ns)
		}
		return
	}
	if c.services[ns] == nil {
		c.services[ns] = map[string]labels.Set{}
	}
	c.services[ns][name] = sel
}

func newCache() *cache {
	return &cache{nodes: map[string]*nodeInfo{}, pods: map[string]*podInfo{}, imageNodes: map[string]int{},
		namespaces: map[string]labels.Set{}, nominations: map[string]string{}, services: map[string]map[string]labels.Set{},
		byLabel: map[labelPair]map[string]*podInfo{}, groups: map[string]*termGroup{}}
}

// nominate records that the pending pod p waits for node, where
// preemption made room for it.
func (c *cache) nominate(p *podInfo, node string) {
	c.unnominate(p.key)
	n, ok := c.nodes[node]
	if !ok {
		return
	}
	n.nominated[p.key] = p
	c.nominations[p.key] = node
}

// unnominate forgets the pod's nomination, if any.
func (c *cache) unnominate(key string) {
	node, ok := c.nominations[key]
	if !ok {
		return
	}
	delete(c.nominations, key)
	if n, ok := c.nodes[node]; ok {
		delete(n.nominated, key)
	}
}

// namespaceLabels are the labels of namespace ns (none if unknown).
func (c *cache) namespaceLabels(ns string) labels.Set { return c.namespaces[ns] }

// setImages records the images node n has now.
func (c *cache) setImages(n *nodeInfo, images map[string]int64) {
	for name := range n.images {
		if c.imageNodes[name]--; c.imageNodes[name] <= 0 {
			delete(c.imageNodes, name)
		}
	}
	n.images = images
	for name := range images {
		c.imageNodes[name]++
	}
}

// setNode adds or updates a node; see nodeInfo.setNode for the result.
func (c *cache) setNode(node *corev1.Node) bool {
	n, ok := c.nodes[node.Name]
	if !ok {
		n = newNodeInfo(node.Name)
		c.nodes[node.Name] = n
	}
	added := n.node == nil
	if added {
		c.list = append(c.list, n)
	}
	old := n.node
	c.setImages(n, nodeImages(node))
	changed := n.setNode(node)
	if c.affine > 0 && (added || !maps.Equal(old.Labels, node.Labels)) {
		c.regroup()
	}
	return changed
}

// removeNode forgets a deleted node; its pods keep counting until they go.
func (c *cache) removeNode(name string) {
	n, ok := c.nodes[name]
	if !ok || n.node == nil {
		return
	}
	n.node = nil
	c.setImages(n, nil)
	c.list = slices.DeleteFunc(c.list, func(x *nodeInfo) bool { return x == n })
	if len(n.affine) > 0 {
		c.regroup()
	}
	if len(n.pods) == 0 {
		delete(c.nodes, name)
	}
}

// addPod records a pod placed on a node (in the store or assumed).
func (c *cache) addPod(p *podInfo) {
	c.removePod(p.key)
	n, ok := c.nodes[p.node]
	if !ok {
		// Its Node is not known (yet, or any more): count it there anyway.
		n = newNodeInfo(p.node)
		c.nodes[p.node] = n
	}
	n.addPod(p)
	c.pods[p.key] = p
	if p.affinity != nil {
		c.affine++
	}
	c.indexPod(p, 1)
}

// removePod forgets a pod; false if it was not known.
func (c *cache) removePod(key string) bool {
	p, ok := c.pods[key]
	if !ok {
		return false
	}
	delete(c.pods, key)
	if p.affinity != nil {
		c.affine--
	}
	c.indexPod(p, -1)
	if n, ok := c.nodes[p.node]; ok {
		n.removePod(p)
		if n.node == nil && len(n.pods) == 0 {
			delete(c.nodes, p.node)
		}
	}
	return true
}

// assumed reports whether key is a pod this scheduler placed and has not
// yet seen bound.
func (c *cache) assumed(key string) bool {
	p, ok := c.pods[key]
	return ok && p.assumed
}
