package kit

import (
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Helpers about pods and pod templates shared by the controllers that own
// pods.

const (
	// DeletionCost is the annotation that orders pods for scale-down.
	DeletionCost = "controller.kubernetes.io/pod-deletion-cost"
	// hashCollisionCountLen is the bytes of a collision count in a
	// TemplateHash.
	hashCollisionCountLen = 4
)

// PodFinished: the pod is Succeeded or Failed.
func PodFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// SlowStart calls fn count times, in batches of 1, 2, 4, … run at once,
// and stops after the first batch with an error. It returns the number of
// successful calls and the first error.
func SlowStart(count int, fn func() error) (int, error) {
	done := 0
	for batch := min(count, 1); batch > 0; batch = min(2*batch, count-done) {
		errs := make(chan error, batch)
		var wg sync.WaitGroup
		for range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fn(); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		done += batch - len(errs)
		if err, failed := <-errs; failed {
			return done, err
		}
	}
	return done, nil
}

// DeleteFirst orders pods for deletion (negative: a goes before b), as
// Kubernetes' ActivePodsWithRanks: unscheduled before scheduled; Pending
// before Unknown before Running; not ready before ready; lower
// pod-deletion-cost first; more pods on the same node first; ready for a
// shorter time first; more container restarts first; newer before older.
func DeleteFirst(a, b *corev1.Pod, rankA, rankB int) int {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return FirstIf(a.Spec.NodeName == "")
	}
	if pa, pb := phaseOrder(a.Status.Phase), phaseOrder(b.Status.Phase); pa != pb {
		return FirstIf(pa < pb)
	}
	readyA, readyB := PodReady(a), PodReady(b)
	if readyA != readyB {
		return FirstIf(!readyA)
	}
	if ca, cb := deletionCost(a), deletionCost(b); ca != cb {
		return FirstIf(ca < cb)
	}
	if rankA != rankB {
		return FirstIf(rankA > rankB)
	}
	if readyA && readyB {
		ta, tb := ReadySince(a), ReadySince(b)
		if !ta.Equal(tb) {
			return FirstIf(ta.IsZero() || !tb.IsZero() && ta.After(tb))
		}
	}
	if ra, rb := restarts(a), restarts(b); ra != rb {
		return FirstIf(ra > rb)
	}
	if ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time; !ta.Equal(tb) {
		return FirstIf(ta.IsZero() || !tb.IsZero() && ta.After(tb))
	}
	return 0
}

// FirstIf is a sort order's answer: a before b if first, else after.
func FirstIf(first bool) int {
	if first {
		return -1
	}
	return 1
}

func phaseOrder(p corev1.PodPhase) int {
	switch p {
	case corev1.PodPending:
		return 0
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	}
	return 3
}

func deletionCost(pod *corev1.Pod) int32 {
	v, ok := pod.Annotations[DeletionCost]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

func restarts(pod *corev1.Pod) int32 {
	var most int32
	for _, st := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for _, c := range st {
			most = max(most, c.RestartCount)
		}
	}
	return most
}

// ReadyCondition is the pod's Ready condition, nil if none.
func ReadyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// PodReady: the pod's Ready condition is true.
func PodReady(pod *corev1.Pod) bool {
	c := ReadyCondition(pod)
	return c != nil && c.Status == corev1.ConditionTrue
}

// ReadySince is when a ready pod turned ready (zero if unknown).
func ReadySince(pod *corev1.Pod) time.Time {
	if c := ReadyCondition(pod); c != nil && c.Status == corev1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// OldestFirst orders a node's pods: bound before unbound, then oldest
// (Kubernetes' podByCreationTimestampAndPhase).
func OldestFirst(a, b *corev1.Pod) int {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return FirstIf(a.Spec.NodeName != "")
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return FirstIf(a.CreationTimestamp.Before(&b.CreationTimestamp))
	}
	return strings.Compare(a.Name, b.Name)
}

// TemplateHash is the pod-template-hash of a template: FNV-32a of
// its JSON (and of the collision count, when there is one), written in
// Kubernetes' safe encoding (no vowels, no look-alike digits).
func TemplateHash(tmpl *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	b, _ := json.Marshal(tmpl)
	h.Write(b)
	if collisionCount != nil {
		var c [hashCollisionCountLen]byte
		binary.LittleEndian.PutUint32(c[:], uint32(*collisionCount))
		h.Write(c[:])
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// WithLabel returns a copy of m with k set to v.
func WithLabel(m map[string]string, k, v string) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	out[k] = v
	return out
}

// Deref is *p, or the zero T if p is nil.
func Deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// NodeReadyStatus is the status of the Node's Ready condition, Unknown if
// it has none.
func NodeReadyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, cd := range n.Status.Conditions {
		if cd.Type == corev1.NodeReady {
			return cd.Status
		}
	}
	return corev1.ConditionUnknown
}
