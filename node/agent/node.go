package agent

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/isle-cluster/isle/hw"
	"github.com/isle-cluster/isle/node/gossip"
)

// Labels and annotations isle puts on Nodes besides Kubernetes' own.
const (
	LabelRole         = "isle.dev/role"        // server or agent
	LabelARMVersion   = "isle.dev/arm-version" // 6 or 7 on 32-bit ARM boards
	LabelControlPlane = "node-role.kubernetes.io/control-plane"
	// LabelArchBeta and LabelOSBeta are the deprecated forms of
	// kubernetes.io/arch and kubernetes.io/os, which kubectl and some
	// charts still select on.
	LabelArchBeta = "beta.kubernetes.io/arch"
	LabelOSBeta   = "beta.kubernetes.io/os"
	// AnnotationModel and AnnotationSerial are the board's model and serial
	// number as its device tree names them (the label hw.LabelBoardModel
	// holds the model in a label's alphabet).
	AnnotationModel  = "isle.dev/model"
	AnnotationSerial = "isle.dev/serial"
	// AnnotationLocalPathRoot is the directory of the board's local-path
	// volumes (DATA-DIR/storage), where the control plane provisions them
	// (control/controllers/volumes/localpath.go).
	AnnotationLocalPathRoot = "isle.dev/local-path-root"
)

const (
	defaultMaxPods       = 110
	memoryReservePercent = 10 // of the board's memory, kept from pods by default
	readyReason          = "KubeletReady"
	notReadyReason       = "KubeletNotReady"
	readyMessage         = "isle agent is posting ready status"
)

// nodeLabels are the labels a board's Node carries.
func nodeLabels(name string, role gossip.Role, f hw.Facts) map[string]string {
	l := map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelArchStable: f.Arch,
		corev1.LabelOSStable:   "linux",
		LabelArchBeta:          f.Arch,
		LabelOSBeta:            "linux",
		LabelRole:              string(role),
	}
	if f.ARMVersion > 0 {
		l[LabelARMVersion] = strconv.Itoa(f.ARMVersion)
	}
	if m := hw.ModelLabel(f.Model); m != "" {
		l[hw.LabelBoardModel] = m
	}
	if role == gossip.RoleServer {
		l[LabelControlPlane] = ""
	}
	return l
}

// nodeReport is what the agent reports in its Node's status: the board's
// addresses, resources and system info, fixed at start, and its pressure
// conditions, which checkPressure re-evaluates.
type nodeReport struct {
	addresses   []corev1.NodeAddress
	capacity    corev1.ResourceList
	allocatable corev1.ResourceList
	info        corev1.NodeSystemInfo
	// memoryThreshold is the available memory, in bytes, below which the
	// board is under memory pressure.
	memoryThreshold int64
	// read reads the board's pressure signals.
	read func() (reading, error)

	mu       sync.Mutex
	pressure pressure // the latest evaluation
	// images are the board's images as status.images lists them (the
	// latest reading, refreshImages); postedImages those last written.
	images, postedImages []corev1.ContainerImage
	// runtimeDown is whether containerd stopped answering (watchRuntime).
	runtimeDown atomic.Bool
	// blocked says why the board cannot run pods at all (set at start:
	// its memory cgroup is off); "" if it can.
	blocked string

	// posted is the pressure last written or found written; only
	// checkPressure's goroutine uses it after start.
	posted pressure
}

// newNodeReport validates cfg's resource and runtime fields against the
// board and takes the first pressure reading. blocked says why the board
// cannot run pods ("": it can).
func newNodeReport(cfg Config, f hw.Facts, blocked string) (*nodeReport, error) {
	if cfg.RuntimeVersion != "" && !strings.Contains(cfg.RuntimeVersion, "://") {
		return nil, fmt.Errorf("agent: RuntimeVersion %q: want runtime://version, such as containerd://1.7.35", cfg.RuntimeVersion)
	}
	disk, err := hw.ReadFilesystem(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("agent: DataDir: %w", err)
	}
	capacity, allocatable, err := nodeResources(cfg, f, disk.Size)
	if err != nil {
		return nil, err
	}
	threshold := cfg.MemoryPressureThreshold
	switch {
	case threshold == 0:
		threshold = min(defaultMemoryThreshold, f.Memory*defaultMemoryThresholdPercent/100)
	case threshold < 0 || threshold >= f.Memory:
		return nil, fmt.Errorf("agent: MemoryPressureThreshold %d: want bytes between 0 and the board's memory, %d", threshold, f.Memory)
	}
	r := &nodeReport{
		addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: cfg.Address},
			{Type: corev1.NodeHostName, Address: cfg.Credential.Name},
		},
		capacity:    capacity,
		allocatable: allocatable,
		info: corev1.NodeSystemInfo{
			MachineID: f.MachineID, SystemUUID: f.MachineID, BootID: f.BootID,
			KernelVersion: f.Kernel, OSImage: f.OSImage, OperatingSystem: "linux", Architecture: f.Arch,
			ContainerRuntimeVersion: cfg.RuntimeVersion, KubeletVersion: cfg.KubeVersion,
		},
		memoryThreshold: threshold,
		read:            boardReader(f.Memory, cfg.DataDir, "/"),
		blocked:         blocked,
	}
	// The first status, which registration posts, has this pressure.
	if r.posted, err = r.evaluate(); err != nil {
		return nil, err
	}
	return r, nil
}

// nodeResources are the board's capacity and what of it pods may have:
// the capacity less cfg's reserves. storage is the size of DataDir's
// filesystem, where pods' ephemeral storage lives.
func nodeResources(cfg Config, f hw.Facts, storage int64) (capacity, allocatable corev1.ResourceList, err error) {
	pods := cfg.MaxPods
	switch {
	case pods == 0:
		pods = defaultMaxPods
	case pods < 0:
		return nil, nil, fmt.Errorf("agent: MaxPods %d: want a positive number, or 0 for %d", pods, defaultMaxPods)
	}
	memoryReserve := cfg.ReservedMemory
	if memoryReserve == 0 {
		memoryReserve = f.Memory * memoryReservePercent / 100
	}
	capacity = corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(pods), resource.DecimalSI)}
	allocatable = capacity.DeepCopy()
	for _, r := range []struct {
		field    string
		name     corev1.ResourceName
		capacity int64 // millicores for CPU, bytes otherwise
		reserved int64
	}{
		{"ReservedCPU", corev1.ResourceCPU, int64(f.CPUs) * 1000, cfg.ReservedCPU},
		{"ReservedMemory", corev1.ResourceMemory, f.Memory, memoryReserve},
		{"ReservedStorage", corev1.ResourceEphemeralStorage, storage, cfg.ReservedStorage},
	} {
		quantity := func(v int64) resource.Quantity {
			if r.name == corev1.ResourceCPU {
				return *resource.NewMilliQuantity(v, resource.DecimalSI)
			}
			return *resource.NewQuantity(v, resource.BinarySI)
		}
		if r.reserved < 0 {
			return nil, nil, fmt.Errorf("agent: %s %d: a reserve cannot be negative", r.field, r.reserved)
		}
		if r.reserved > r.capacity {
			q, c := quantity(r.reserved), quantity(r.capacity)
			return nil, nil, fmt.Errorf("agent: %s %s is more than the board's %s, %s", r.field, q.String(), r.name, c.String())
		}
		capacity[r.name] = quantity(r.capacity)
		allocatable[r.name] = quantity(r.capacity - r.reserved)
	}
	return capacity, allocatable, nil
}

// status is the Node status the board posts at now: what it has, where it
// is, its pressure, and that it is ready.
func (r *nodeReport) status(now time.Time) corev1.NodeStatus {
	r.mu.Lock()
	p, images := r.pressure, slices.Clone(r.images)
	r.mu.Unlock()
	return corev1.NodeStatus{
		Capacity:    r.capacity.DeepCopy(),
		Allocatable: r.allocatable.DeepCopy(),
		Conditions:  p.conditions(now),
		Addresses:   slices.Clone(r.addresses),
		NodeInfo:    r.info,
		Images:      images,
	}
}

// readyByAgent reports whether the Node's Ready condition is the one this
// agent posts (and not, say, Unknown set by the control plane while the
// board was unreachable).
func readyByAgent(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue && c.Reason == readyReason
		}
	}
	return false
}

// applyStatus sets what the agent owns in n's status and reports whether
// anything changed; conditions keep their transition times when their
// status does not change.
func applyStatus(n *corev1.Node, want corev1.NodeStatus) bool {
	changed := false
	old := n.Status
	for i, c := range want.Conditions {
		for _, o := range old.Conditions {
			if o.Type == c.Type && o.Status == c.Status {
				want.Conditions[i].LastTransitionTime = o.LastTransitionTime
			}
		}
	}
	// Resources someone else advertises (an extended resource patched in,
	// as a device plugin's or a test's) stay, as the kubelet keeps them.
	capacity, allocatable := withOthers(want.Capacity, old.Capacity), withOthers(want.Allocatable, old.Allocatable)
	if !equalResources(old.Capacity, capacity) || !equalResources(old.Allocatable, allocatable) {
		n.Status.Capacity, n.Status.Allocatable, changed = capacity, allocatable, true
	}
	if fmt.Sprint(old.Addresses) != fmt.Sprint(want.Addresses) || old.NodeInfo != want.NodeInfo {
		n.Status.Addresses, n.Status.NodeInfo, changed = want.Addresses, want.NodeInfo, true
	}
	if old.DaemonEndpoints != want.DaemonEndpoints {
		n.Status.DaemonEndpoints, changed = want.DaemonEndpoints, true
	}
	if want.Images != nil && !equality.Semantic.DeepEqual(old.Images, want.Images) {
		n.Status.Images, changed = want.Images, true
	}
	for _, c := range want.Conditions {
		i := conditionIndex(n.Status.Conditions, c.Type)
		if i < 0 {
			n.Status.Conditions = append(n.Status.Conditions, c)
			changed = true
			continue
		}
		o := n.Status.Conditions[i]
		if o.Status != c.Status || o.Reason != c.Reason || o.Message != c.Message {
			n.Status.Conditions[i] = c
			changed = true
		}
	}
	return changed
}

// withOthers is the agent's resources and those of old it does not own:
// names in a domain (example.com/dongle) and hugepages.
func withOthers(agent, old corev1.ResourceList) corev1.ResourceList {
	out := agent.DeepCopy()
	for name, q := range old {
		if _, ok := out[name]; !ok && (strings.Contains(string(name), "/") || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)) {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[name] = q.DeepCopy()
		}
	}
	return out
}

func conditionIndex(cs []corev1.NodeCondition, t corev1.NodeConditionType) int {
	for i, c := range cs {
		if c.Type == t {
			return i
		}
	}
	return -1
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}
