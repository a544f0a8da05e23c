package agent

import (
	"fmt"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/hw"
	"github.com/isle-cluster/isle/node/gossip"
)

// Labels and annotations isle puts on Nodes besides Kubernetes' own.
const (
	LabelRole          = "isle.dev/role"        // server or agent
	LabelARMVersion    = "isle.dev/arm-version" // 6 or 7 on 32-bit ARM boards
	LabelControlPlane  = "node-role.kubernetes.io/control-plane"
	AnnotationModel    = "isle.dev/board-model"
	maxPods            = 110
	readyReason        = "KubeletReady"
	readyMessage       = "isle agent is posting ready status"
	memoryReservedPart = 10 // percent of memory kept from pods for the system and isle
)

// nodeLabels are the labels a board's Node carries.
func nodeLabels(name string, role gossip.Role, f hw.Facts) map[string]string {
	l := map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelArchStable: f.Arch,
		corev1.LabelOSStable:   "linux",
		LabelRole:              string(role),
	}
	if f.ARMVersion > 0 {
		l[LabelARMVersion] = strconv.Itoa(f.ARMVersion)
	}
	if role == gossip.RoleServer {
		l[LabelControlPlane] = ""
	}
	return l
}

// nodeStatus is the status a board posts: what it has, where it is, and
// that it is ready.
func nodeStatus(addr string, name, kubeVersion string, f hw.Facts, dataDir string, now time.Time) corev1.NodeStatus {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(f.CPUs), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(f.Memory, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(maxPods, resource.DecimalSI),
	}
	var st syscall.Statfs_t
	if syscall.Statfs(dataDir, &st) == nil {
		capacity[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(st.Blocks)*int64(st.Bsize), resource.BinarySI)
	}
	allocatable := capacity.DeepCopy()
	allocatable[corev1.ResourceMemory] = *resource.NewQuantity(f.Memory-f.Memory*memoryReservedPart/100, resource.BinarySI)

	t := metav1.NewTime(now)
	cond := func(typ corev1.NodeConditionType, status corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastHeartbeatTime: t, LastTransitionTime: t}
	}
	return corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: allocatable,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "isle agent has sufficient memory available"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "isle agent has no disk pressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "isle agent has sufficient PID available"),
			cond(corev1.NodeReady, corev1.ConditionTrue, readyReason, readyMessage),
		},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: addr},
			{Type: corev1.NodeHostName, Address: name},
		},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID: f.MachineID, SystemUUID: f.MachineID, BootID: f.BootID,
			KernelVersion: f.Kernel, OSImage: f.OSImage, OperatingSystem: "linux", Architecture: f.Arch,
			KubeletVersion: kubeVersion,
		},
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
	if !equalResources(old.Capacity, want.Capacity) || !equalResources(old.Allocatable, want.Allocatable) {
		n.Status.Capacity, n.Status.Allocatable, changed = want.Capacity, want.Allocatable, true
	}
	if fmt.Sprint(old.Addresses) != fmt.Sprint(want.Addresses) || old.NodeInfo != want.NodeInfo {
		n.Status.Addresses, n.Status.NodeInfo, changed = want.Addresses, want.NodeInfo, true
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
