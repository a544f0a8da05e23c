package pods

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/isle-cluster/isle/node/containers"
	"github.com/isle-cluster/isle/node/logs"
)

func metaNow() metav1.Time { return metav1.NewTime(time.Now().Truncate(time.Second)) }

// podStatus computes a pod's status from its containers.
func (m *Manager) podStatus(pod *corev1.Pod, ps *podState) corev1.PodStatus {
	st := corev1.PodStatus{QOSClass: pod.Status.QOSClass, StartTime: ps.startTime}
	tmp := pod.DeepCopy()
	m.fillIPs(tmp, ps)
	st.HostIP, st.HostIPs, st.PodIP, st.PodIPs = tmp.Status.HostIP, tmp.Status.HostIPs, tmp.Status.PodIP, tmp.Status.PodIPs

	initDone := true
	var incomplete, unready []string // as the kubelet names them in the conditions' messages
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := m.containerStatus(pod, ps, c, true)
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			initDone = false
			incomplete = append(incomplete, c.Name)
		} else {
			cs.Ready = true // an init container that succeeded is ready, as the kubelet says
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	allReady := true
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := m.containerStatus(pod, ps, c, false)
		if !cs.Ready {
			allReady = false
			unready = append(unready, c.Name)
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	st.Phase = phase(pod, st, initDone, ps.podFailed)
	if isTerminal(pod) && st.Phase != pod.Status.Phase {
		st.Phase = pod.Status.Phase // a finished pod stays finished
	}
	switch {
	case ps.failReason != "":
		st.Reason, st.Message = ps.failReason, ps.failMessage
	case isTerminal(pod):
		st.Reason, st.Message = pod.Status.Reason, pod.Status.Message
	}
	ready := allReady && initDone && st.Phase == corev1.PodRunning
	for _, g := range pod.Spec.ReadinessGates {
		if !conditionTrue(pod.Status.Conditions, g.ConditionType) {
			ready = false
		}
	}
	cond := func(t corev1.PodConditionType, ok bool, reason, msg string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: msg}
		if ok {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, "", ""
		}
		c.LastTransitionTime = transitionTime(pod.Status.Conditions, t, c.Status)
		return c
	}
	st.Conditions = append(st.Conditions,
		cond(corev1.PodInitialized, initDone, "ContainersNotInitialized", listMessage("containers with incomplete status", incomplete)),
		cond(corev1.ContainersReady, allReady && initDone, "ContainersNotReady", listMessage("containers with unready status", unready)),
		cond(corev1.PodReady, ready, "ContainersNotReady", listMessage("containers with unready status", unready)),
	)
	if st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed {
		st.Conditions[1].Reason, st.Conditions[2].Reason = "PodCompleted", "PodCompleted"
		st.Conditions[1].Message, st.Conditions[2].Message = "", ""
	}
	// Conditions others own (PodScheduled, readiness gates, DisruptionTarget)
	// stay. A pod that came with its node (a DaemonSet's, or one created
	// with spec.nodeName) has no PodScheduled from the scheduler: as the
	// kubelet does, the board reports it scheduled, here.
	scheduled := false
	for _, c := range pod.Status.Conditions {
		switch c.Type {
		case corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady:
		default:
			scheduled = scheduled || c.Type == corev1.PodScheduled
			st.Conditions = append(st.Conditions, c)
		}
	}
	if !scheduled {
		st.Conditions = append(st.Conditions, cond(corev1.PodScheduled, true, "", ""))
	}
	return st
}

// listMessage is a condition's message naming containers, as the
// kubelet words it: "containers with unready status: [a b]"; "" for none.
func listMessage(what string, names []string) string {
	if len(names) == 0 {
		return ""
	}
	return what + ": [" + strings.Join(names, " ") + "]"
}

func conditionTrue(cs []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range cs {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// transitionTime keeps a condition's transition time while its status
// stays.
func transitionTime(cs []corev1.PodCondition, t corev1.PodConditionType, s corev1.ConditionStatus) metav1.Time {
	for _, c := range cs {
		if c.Type == t && c.Status == s {
			return c.LastTransitionTime
		}
	}
	return metaNow()
}

// phase is Kubernetes' pod phase from its containers' states.
func phase(pod *corev1.Pod, st corev1.PodStatus, initDone, initFailed bool) corev1.PodPhase {
	if initFailed {
		return corev1.PodFailed
	}
	if !initDone {
		return corev1.PodPending
	}
	var running, waiting, stopped, succeeded, unknown int
	for _, cs := range st.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil:
			if cs.LastTerminationState.Terminated != nil {
				stopped++ // restarting
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}
	switch {
	case waiting > 0 || unknown > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped > 0 && pod.Spec.RestartPolicy == corev1.RestartPolicyAlways:
		return corev1.PodRunning // restarting
	case stopped > 0 && stopped == succeeded:
		return corev1.PodSucceeded
	case stopped > 0 && pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
		return corev1.PodFailed
	case stopped > 0:
		return corev1.PodRunning // OnFailure: the failed ones restart
	}
	return corev1.PodPending
}

// containerStatus is one container's status: its current attempt's state,
// the previous attempt's as lastState.
func (m *Manager) containerStatus(pod *corev1.Pod, ps *podState, c *corev1.Container, init bool) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image}
	att := ps.attempts(c.Name, init)
	f := false
	cs.Started = &f
	if len(att) == 0 {
		w := ps.waiting[c.Name]
		switch {
		case w.Reason != "":
		case len(pod.Spec.InitContainers) > 0:
			// As the kubelet: every container of a pod with init
			// containers waits "PodInitializing" until it is created.
			w.Reason = "PodInitializing"
		default:
			w.Reason = "ContainerCreating"
		}
		cs.State.Waiting = &w
		return cs
	}
	cur := att[0]
	cs.RestartCount = int32(attempt(cur))
	cs.ContainerID = "containerd://" + cur.ID
	cs.ImageID = cur.Labels[labelImageID]
	if len(att) > 1 {
		cs.LastTerminationState = m.ctrState(pod, att[1], c)
	}
	cs.State = m.ctrState(pod, cur, c)
	switch {
	case cur.State == containers.Running:
		ready, started := ps.probeState(cur.ID)
		cs.Ready, cs.Started = ready, &started
	case cur.State == containers.Exited && (init || restartable(pod.Spec.RestartPolicy, cur.ExitCode)) && !(init && cur.ExitCode == 0):
		if w, ok := ps.waiting[c.Name]; ok && !ps.terminating.Load() {
			// Waiting to restart: the exit becomes lastState.
			cs.LastTerminationState = cs.State
			cs.State = corev1.ContainerState{Waiting: &w}
		}
	}
	return cs
}

// ctrState is a container's state as the API shows it.
func (m *Manager) ctrState(pod *corev1.Pod, c containers.Container, spec *corev1.Container) corev1.ContainerState {
	switch c.State {
	case containers.Running:
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}}
	case containers.Created:
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	}
	t := &corev1.ContainerStateTerminated{ExitCode: int32(c.ExitCode), StartedAt: metav1.NewTime(c.StartedAt),
		FinishedAt: metav1.NewTime(c.FinishedAt), ContainerID: "containerd://" + c.ID, Reason: c.Reason, Message: c.Message}
	switch {
	case t.Reason != "":
	case c.OOMKilled:
		t.Reason = "OOMKilled"
	case c.ExitCode == 0:
		t.Reason = "Completed"
	default:
		t.Reason = "Error"
	}
	if t.Message == "" {
		t.Message = m.terminationMessage(pod, c, spec)
	}
	return corev1.ContainerState{Terminated: t}
}

// terminationMessage reads what the container wrote to its
// terminationMessagePath, or the end of its log with
// FallbackToLogsOnError.
func (m *Manager) terminationMessage(pod *corev1.Pod, c containers.Container, spec *corev1.Container) string {
	if spec == nil {
		return ""
	}
	f := filepath.Join(m.podDir(pod.UID), "termination", spec.Name+"-"+strconv.Itoa(attempt(c)))
	if b, err := os.ReadFile(f); err == nil && len(b) > 0 {
		if len(b) > 4096 {
			b = b[:4096]
		}
		return string(b)
	}
	if spec.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError || c.ExitCode == 0 {
		return ""
	}
	// As the kubelet: the last 2 KiB of the log's last 80 lines.
	var buf bytes.Buffer
	path := m.logPath(pod.Namespace, pod.Name, pod.UID, spec.Name, attempt(c))
	if err := logs.Read(context.Background(), path, logs.ReadOptions{TailLines: 80}, &buf); err != nil {
		return "Error on reading termination message from logs: " + err.Error()
	}
	b := buf.Bytes()
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return string(b)
}

// statusWriter writes pods' statuses when they change, one write per pod
// however often it changed meanwhile (writes are batched by the writer
// being busy), as merge patches of the status subresource.
type statusWriter struct {
	client *rest.RESTClient
	log    *slog.Logger
	kick   chan struct{}
	// bound says whether a pod is still this board's (in its informer); a
	// write refused for a pod that no longer is (the API server forbids a
	// board the status of a pod it does not hold) is dropped. nil: all are.
	bound func(types.UID) bool
	// retrying: a retry of failed writes is due; one at a time.
	retrying atomic.Bool
	// retryLevel is the level of a failed write's line (Config.retryLevel).
	retryLevel func(error) slog.Level

	mu      sync.Mutex
	pending map[types.UID]pendingStatus
	written map[types.UID]corev1.PodStatus
}

type pendingStatus struct {
	namespace, name string
	status          corev1.PodStatus
}

func newStatusWriter(c *rest.RESTClient, log *slog.Logger) *statusWriter {
	return &statusWriter{client: c, log: log, kick: make(chan struct{}, 1), pending: map[types.UID]pendingStatus{},
		written: map[types.UID]corev1.PodStatus{}, retryLevel: func(error) slog.Level { return slog.LevelWarn }}
}

// set asks for pod's status to become st, if that is a change.
func (w *statusWriter) set(pod *corev1.Pod, st corev1.PodStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.written[pod.UID]
	if !ok {
		last = pod.Status
	}
	if apiequality.Semantic.DeepEqual(last, st) {
		delete(w.pending, pod.UID)
		return
	}
	w.pending[pod.UID] = pendingStatus{pod.Namespace, pod.Name, st}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *statusWriter) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pending, uid)
	delete(w.written, uid)
}

func (w *statusWriter) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		}
		w.mu.Lock()
		uids := make([]types.UID, 0, len(w.pending))
		for uid := range w.pending {
			uids = append(uids, uid)
		}
		w.mu.Unlock()
		retry := false
		for _, uid := range uids {
			if !w.flush(ctx, uid) {
				retry = true
			}
		}
		if retry && w.retrying.CompareAndSwap(false, true) {
			time.AfterFunc(time.Second, func() {
				w.retrying.Store(false)
				select {
				case w.kick <- struct{}{}:
				default:
				}
			})
		}
	}
}

// flush writes uid's pending status now; false if it failed (it stays
// pending).
func (w *statusWriter) flush(ctx context.Context, uid types.UID) bool {
	w.mu.Lock()
	p, ok := w.pending[uid]
	w.mu.Unlock()
	if !ok {
		return true
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid}, "status": p.status})
	if err == nil {
		err = w.client.Patch(types.MergePatchType).Namespace(p.namespace).Resource("pods").Name(p.name).
			SubResource("status").Body(patch).Do(ctx).Error()
	}
	gone := apierrors.IsNotFound(err) || apierrors.IsForbidden(err) && w.bound != nil && !w.bound(uid)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil && !gone {
		if ctx.Err() == nil {
			w.log.Log(ctx, w.retryLevel(err), "pods: status not written", "pod", p.namespace+"/"+p.name, "err", err)
		}
		return false
	}
	if cur, ok := w.pending[uid]; ok && apiequality.Semantic.DeepEqual(cur.status, p.status) {
		delete(w.pending, uid)
	}
	if err == nil {
		w.written[uid] = p.status
	}
	return true
}
