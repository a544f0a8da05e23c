package pods

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/node/containers"
	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/node/probe"
)

// terminate stops a pod that is deleted or being deleted (pod nil: gone
// from the API, or deleted while the agent was down) in a goroutine of
// its own, the grace period being the pod's: preStop hooks, the stop
// signal, SIGKILL after the grace; then everything of the pod is removed
// and its deletion finished.
func (m *Manager) terminate(ctx context.Context, pod *corev1.Pod, ps *podState) {
	if !ps.terminating.CompareAndSwap(false, true) {
		return
	}
	go func() {
		if err := m.kill(ctx, pod, ps); err != nil {
			m.log.Warn("pods: stop pod", "pod", ps.key(), "err", err)
			ps.terminating.Store(false)
			m.queue.AddAfter(ps.uid, 2*time.Second)
			return
		}
		m.mu.Lock()
		delete(m.state, ps.uid)
		m.mu.Unlock()
		m.status.forget(ps.uid)
		if pod != nil {
			m.finishDeletion(ctx, pod)
		}
	}()
}

// stop stops the pod's running containers (preStop hooks, the stop
// signal, SIGKILL after the pod's grace period) and posts the pod's
// status with them terminated. Their records stay: a pod failed by its
// deadline keeps its containers for their logs until it is deleted.
func (m *Manager) stop(ctx context.Context, pod *corev1.Pod, ps *podState) error {
	grace := 30 * time.Second
	if pod != nil {
		grace = gracePeriod(pod)
	}
	deadline := time.Now().Add(grace)
	m.stopProbes(ps, nil)
	var wg sync.WaitGroup
	all := ps.all()
	errs := make(chan error, len(all))
	for _, c := range all {
		if c.State == containers.Exited {
			continue
		}
		wg.Add(1)
		go func(c containers.Container) {
			defer wg.Done()
			if pod != nil {
				name := c.Labels[labelContainer]
				if spec := containerSpecOf(pod, name); spec != nil && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil {
					m.preStop(ctx, pod, ps, spec, c.ID, time.Until(deadline))
				}
				m.events.normal(pod, "Killing", "Stopping container "+name)
				m.activity()
			}
			if err := m.rt.Stop(ctx, c.ID, max(0, time.Until(deadline))); err != nil {
				errs <- err
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	// The pod's final status: its containers terminated.
	if pod != nil {
		if err := m.refreshAll(ctx, ps); err == nil {
			m.status.set(pod, m.podStatus(pod, ps))
			m.status.flush(ctx, pod.UID)
		}
	}
	return nil
}

// kill stops the pod's containers, then removes everything of the pod:
// containers, network, volumes, cgroup and logs.
func (m *Manager) kill(ctx context.Context, pod *corev1.Pod, ps *podState) error {
	if err := m.stop(ctx, pod, ps); err != nil {
		return err
	}
	for _, c := range ps.all() {
		if err := m.rt.Remove(ctx, c.ID); err != nil {
			return err
		}
		ps.dropContainer(c.ID)
	}
	path := m.netnsPath(ps.uid)
	if err := m.cfg.Network.Detach(ctx, ps.uid, path); err != nil {
		return err
	}
	if err := netns.Delete(path); err != nil {
		return fmt.Errorf("pods: network namespace: %w", err)
	}
	if err := m.vol.Teardown(ps.uid); err != nil {
		return err
	}
	if err := containers.RemoveCgroup(m.podCgroup(ps.uid)); err != nil {
		m.log.Warn("pods: cgroup not removed", "pod", ps.key(), "err", err)
	}
	if ns, name := ps.names(); ns != "" {
		_ = os.RemoveAll(m.podLogDir(ns, name, string(ps.uid)))
	}
	return nil
}

// finishDeletion deletes a pod whose containers are gone, as the kubelet
// does: with grace 0 and its UID as precondition (a new pod of the same
// name is left alone).
func (m *Manager) finishDeletion(ctx context.Context, pod *corev1.Pod) {
	if pod.DeletionTimestamp == nil {
		return
	}
	zero := int64(0)
	err := m.cfg.Client.Delete().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).
		Body(&metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}}).
		Do(ctx).Error()
	// Forbidden once the pod is no longer this board's: another deleted it.
	gone := apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsForbidden(err) && m.pod(pod.UID) == nil
	if err != nil && !gone && ctx.Err() == nil {
		m.log.Warn("pods: finish a pod's deletion", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		m.queue.AddAfter(pod.UID, 2*time.Second)
	}
}

func containerSpecOf(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

// preStop runs a container's preStop hook, within the grace left.
func (m *Manager) preStop(ctx context.Context, pod *corev1.Pod, ps *podState, c *corev1.Container, id string, left time.Duration) {
	if left <= 0 {
		return
	}
	hctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	if msg := m.runHook(hctx, pod, ps, c, id, c.Lifecycle.PreStop, left); msg != "" {
		m.events.warning(pod, "FailedPreStopHook", fmt.Sprintf("PreStopHook failed: %s", msg))
	}
}

// postStart runs a container's postStart hook; a failure kills the
// container (it is then restarted as its pod's policy says).
func (m *Manager) postStart(ctx context.Context, pod *corev1.Pod, ps *podState, c *corev1.Container, id string) {
	if msg := m.runHook(ctx, pod, ps, c, id, c.Lifecycle.PostStart, gracePeriod(pod)); msg != "" {
		m.events.warning(pod, "FailedPostStartHook", fmt.Sprintf("PostStartHook failed: %s", msg))
		_ = m.rt.Stop(ctx, id, gracePeriod(pod))
		_ = m.refresh(ctx, ps, id)
	}
}

// runHook runs a lifecycle handler; it returns why it failed, "" if not.
func (m *Manager) runHook(ctx context.Context, pod *corev1.Pod, ps *podState, c *corev1.Container, id string, h *corev1.LifecycleHandler, timeout time.Duration) string {
	if h.Sleep != nil {
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
		}
		return ""
	}
	p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: h.Exec, HTTPGet: h.HTTPGet, TCPSocket: h.TCPSocket},
		TimeoutSeconds: int32(max(1, timeout/time.Second))}
	res, msg := probe.Do(ctx, p, m.probeTarget(pod, ps, c, id), m.rt)
	if res == probe.Success {
		return ""
	}
	if msg == "" {
		msg = res.String()
	}
	return msg
}
