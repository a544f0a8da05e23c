package pods

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/node/containers"
	"github.com/isle-cluster/isle/node/dns"
	"github.com/isle-cluster/isle/node/netns"
)

// sync brings one pod to what it asks.
func (m *Manager) sync(ctx context.Context, uid types.UID) error {
	pod := m.pod(uid)
	m.mu.Lock()
	ps := m.state[uid]
	m.mu.Unlock()
	if pod == nil || pod.DeletionTimestamp != nil {
		if ps == nil {
			ps = m.stateOf(uid, "", "")
			if pod != nil {
				ps.setNames(pod.Namespace, pod.Name)
			}
		}
		m.terminate(ctx, pod, ps)
		return nil
	}
	if ps == nil {
		ps = m.stateOf(uid, pod.Namespace, pod.Name)
	}
	ps.setNames(pod.Namespace, pod.Name)
	if ps.terminating.Load() {
		return nil
	}
	if !isTerminal(pod) && !ps.podFailed && ps.startTime == nil {
		// Admission, as the kubelet's: the sysctls the board allows.
		if why := forbiddenSysctl(pod); why != "" {
			ps.podFailed, ps.failReason, ps.failMessage = true, sysctlReason, "Pod was rejected: "+why
			m.events.warning(pod, sysctlReason, why)
		} else if m.hostPortTaken(pod) {
			ps.podFailed, ps.failReason, ps.failMessage = true, hostPortReason, "Pod was rejected: "+hostPortMessage
			m.events.warning(pod, hostPortReason, hostPortMessage)
		}
	}
	if !isTerminal(pod) && !ps.podFailed {
		if left, ok := activeDeadline(pod, ps, time.Now()); ok && left <= 0 {
			ps.podFailed, ps.failReason, ps.failMessage = true, deadlineReason, deadlineMessage
			m.events.normal(pod, deadlineReason, deadlineMessage)
		} else if ok {
			m.queue.AddAfter(uid, left)
		}
	}
	if isTerminal(pod) || ps.podFailed {
		// Done: nothing restarts. Its containers stay for their logs until
		// the pod is deleted; those of a pod past its deadline are stopped.
		m.stopProbes(ps, nil)
		if ps.failReason == deadlineReason && hasRunning(ps) && ps.killing.CompareAndSwap(false, true) {
			go func() {
				defer ps.killing.Store(false)
				if err := m.stop(ctx, pod, ps); err != nil {
					m.log.Warn("pods: stop a pod past its deadline", "pod", ps.key(), "err", err)
					m.queue.AddAfter(uid, 2*time.Second)
				}
			}()
		}
		m.status.set(pod, m.podStatus(pod, ps))
		return nil
	}
	next, err := m.syncRunning(ctx, pod, ps)
	m.status.set(pod, m.podStatus(pod, ps))
	if next > 0 {
		m.queue.AddAfter(uid, next)
	}
	return err
}

// A pod active longer than its activeDeadlineSeconds fails, as the
// kubelet words it.
const (
	deadlineReason  = "DeadlineExceeded"
	deadlineMessage = "Pod was active on the node longer than the specified deadline"
)

// activeDeadline is how long pod may still run by its
// activeDeadlineSeconds, counted from its start; ok is false when it has
// no deadline or has not started.
func activeDeadline(pod *corev1.Pod, ps *podState, now time.Time) (left time.Duration, ok bool) {
	ads := pod.Spec.ActiveDeadlineSeconds
	start := ps.startTime
	if start == nil {
		start = pod.Status.StartTime
	}
	if ads == nil || start == nil {
		return 0, false
	}
	return start.Add(time.Duration(*ads) * time.Second).Sub(now), true
}

// hasRunning says whether any container of the pod has not exited.
func hasRunning(ps *podState) bool {
	for _, c := range ps.all() {
		if c.State != containers.Exited {
			return true
		}
	}
	return false
}

func isTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// syncRunning makes a live pod's sandbox, volumes and containers; it
// returns when to look again (a back-off ending), 0 for no need.
func (m *Manager) syncRunning(ctx context.Context, pod *corev1.Pod, ps *podState) (time.Duration, error) {
	if ps.startTime == nil {
		if pod.Status.StartTime != nil {
			ps.startTime = pod.Status.StartTime.DeepCopy()
		} else {
			now := metaNow()
			ps.startTime = &now
		}
	}
	if err := m.sandbox(ctx, pod, ps); err != nil {
		m.waitAll(pod, ps, "", "") // the default reason (containerStatus)
		m.events.warning(pod, "FailedCreatePodSandBox", err.Error())
		return 5 * time.Second, err
	}
	paths, err := m.vol.Setup(ctx, pod)
	if err != nil {
		m.waitAll(pod, ps, "", "") // the default reason (containerStatus)
		m.events.warning(pod, "FailedMount", err.Error())
		return 5 * time.Second, nil
	}
	var next time.Duration
	wake := func(d time.Duration) {
		if d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	// Init containers, in order, each to success.
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cur := ps.current(c.Name, true)
		switch {
		case cur == nil:
			wake(m.startContainer(ctx, pod, ps, c, true, paths, 0))
			return next, nil
		case cur.State != containers.Exited:
			return next, nil // running: its exit wakes us
		case cur.ExitCode == 0:
			continue
		case pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
			ps.podFailed = true
			return 0, nil
		default:
			wake(m.restart(ctx, pod, ps, c, true, paths, cur))
			return next, nil
		}
	}
	// App containers.
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cur := ps.current(c.Name, false)
		if cur == nil {
			wake(m.startContainer(ctx, pod, ps, c, false, paths, 0))
			continue
		}
		if cur.State != containers.Exited {
			if why := m.mustRestart(ps, c, cur); why != "" {
				m.events.normal(pod, "Killing", fmt.Sprintf("Container %s %s, will be restarted", c.Name, why))
				m.activity()
				if err := m.rt.Stop(ctx, cur.ID, gracePeriod(pod)); err != nil {
					return 2 * time.Second, err
				}
				if err := m.refresh(ctx, ps, cur.ID); err != nil {
					return 2 * time.Second, err
				}
				cur = ps.current(c.Name, false)
			} else {
				continue
			}
		}
		if !restartable(pod.Spec.RestartPolicy, cur.ExitCode) {
			continue
		}
		wake(m.restart(ctx, pod, ps, c, false, paths, cur))
	}
	m.prune(ctx, pod, ps)
	m.ensureProbes(pod, ps)
	return next, nil
}

func restartable(policy corev1.RestartPolicy, exitCode int) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	default:
		return true
	}
}

// mustRestart says why a running container must be restarted: its
// liveness or startup probe failed, or its spec changed.
func (m *Manager) mustRestart(ps *podState, c *corev1.Container, cur *containers.Container) string {
	if cur.Labels[labelHash] != specHash(c) {
		return "definition changed"
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p := ps.probes[cur.ID]; p != nil {
		switch {
		case p.liveFailed:
			return "failed liveness probe"
		case p.startupFailed:
			return "failed startup probe"
		}
	}
	return ""
}

// restart starts a new attempt of an exited container, or waits out its
// back-off (CrashLoopBackOff).
func (m *Manager) restart(ctx context.Context, pod *corev1.Pod, ps *podState, c *corev1.Container, init bool, paths map[string]string, cur *containers.Container) time.Duration {
	b := ps.backoff[c.Name]
	if b == nil {
		b = &backoff{}
		ps.backoff[c.Name] = b
	}
	now := time.Now()
	if now.Before(b.until) {
		msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", b.delay, c.Name, pod.Name, pod.Namespace, pod.UID)
		if w := ps.waiting[c.Name]; w.Reason != "CrashLoopBackOff" {
			m.events.warning(pod, "BackOff", "Back-off restarting failed container "+c.Name+" in pod "+pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")")
		}
		ps.waiting[c.Name] = corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: msg}
		return b.until.Sub(now)
	}
	ran := cur.FinishedAt.Sub(cur.StartedAt)
	d := m.startContainer(ctx, pod, ps, c, init, paths, attempt(*cur)+1)
	b.next(now, ran)
	return d
}

// prune removes containers no longer needed: attempts older than the
// previous one (kept for `kubectl logs --previous` and lastState), and
// containers whose name the pod no longer has.
func (m *Manager) prune(ctx context.Context, pod *corev1.Pod, ps *podState) {
	names := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		names["i/"+c.Name] = true
	}
	for _, c := range pod.Spec.Containers {
		names["c/"+c.Name] = true
	}
	keep := map[string]bool{}
	for n := range names {
		init, name := n[0] == 'i', n[2:]
		for i, c := range ps.attempts(name, init) {
			if i < 2 {
				keep[c.ID] = true
			}
		}
	}
	for _, c := range ps.all() {
		if keep[c.ID] {
			continue
		}
		if err := m.rt.Remove(ctx, c.ID); err != nil {
			m.log.Warn("pods: remove an old container", "pod", pod.Namespace+"/"+pod.Name, "container", c.ID, "err", err)
			continue
		}
		ps.dropContainer(c.ID)
		m.stopProbes(ps, map[string]bool{c.ID: true})
	}
}

// refresh reads a container's state again from containerd.
func (m *Manager) refresh(ctx context.Context, ps *podState, id string) error {
	c, err := m.rt.Inspect(ctx, id)
	if errors.Is(err, containers.ErrNotFound) {
		ps.dropContainer(id)
		return nil
	}
	if err != nil {
		return err
	}
	ps.setContainer(c)
	return nil
}

// refreshAll reads the state of all the pod's containers.
func (m *Manager) refreshAll(ctx context.Context, ps *podState) error {
	for _, c := range ps.all() {
		if c.State == containers.Exited {
			continue // final
		}
		if err := m.refresh(ctx, ps, c.ID); err != nil {
			return err
		}
	}
	return nil
}

// sandbox makes the pod's network namespace and network.
func (m *Manager) sandbox(ctx context.Context, pod *corev1.Pod, ps *podState) error {
	if err := m.refreshAll(ctx, ps); err != nil {
		return err
	}
	if ps.attached {
		return nil
	}
	// Once per pod and agent start (an adopted pod's namespace exists:
	// Create and Attach find what is there).
	if pod.Spec.HostNetwork {
		ps.ips = []string{m.cfg.NodeIP}
	} else {
		path := m.netnsPath(pod.UID)
		if err := netns.Create(path); err != nil {
			return fmt.Errorf("pods: network namespace of %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		ps.netns = path
		ips, err := m.cfg.Network.Attach(ctx, pod, path)
		if err != nil {
			return fmt.Errorf("pods: network of %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		ps.ips = ips
	}
	if err := m.podFiles(pod, ps); err != nil {
		return err
	}
	ps.attached = true
	return nil
}

// podFiles writes the files every container of the pod gets: /etc/hosts,
// /etc/hostname and /etc/resolv.conf (by the pod's dnsPolicy, as a kubelet
// writes it).
func (m *Manager) podFiles(pod *corev1.Pod, ps *podState) error {
	dir := m.podDir(pod.UID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pods: %w", err)
	}
	host := podHostname(pod)
	var nodeHosts []byte
	if pod.Spec.HostNetwork {
		nodeHosts, _ = os.ReadFile("/etc/hosts")
	}
	hosts := hostsFile(pod, ps.ips, m.cfg.ClusterDomain, nodeHosts)
	resolv, err := m.resolvConf(pod)
	if err != nil {
		return err
	}
	for name, content := range map[string]string{"hosts": hosts, "hostname": host + "\n", "resolv.conf": string(resolv)} {
		p := filepath.Join(dir, name)
		if b, err := os.ReadFile(p); err == nil && string(b) == content {
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("pods: %w", err)
		}
	}
	return nil
}

// resolvConf is the pod's /etc/resolv.conf: the board's file with its
// dnsPolicy applied.
func (m *Manager) resolvConf(pod *corev1.Pod) ([]byte, error) {
	host, err := os.ReadFile(m.cfg.ResolvConf)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("pods: the board's resolver configuration: %w", err)
	}
	if !m.cfg.ClusterDNS.IsValid() && pod.Spec.DNSPolicy != corev1.DNSNone {
		pod = pod.DeepCopy()
		pod.Spec.DNSPolicy = corev1.DNSDefault
	}
	out, err := dns.PodResolvConf(pod, m.cfg.ClusterDNS, m.cfg.ClusterDomain, host)
	if err != nil {
		return nil, fmt.Errorf("pods: /etc/resolv.conf: %w", err)
	}
	return out, nil
}

// hostsFile is a pod's /etc/hosts as the kubelet writes it: for a pod on
// the Pod network, localhost, the pod's IPs with its hostname (and its
// FQDN with a subdomain), then its hostAliases; for a pod on the host's
// network, the board's own file (nodeHosts) with the hostAliases.
func hostsFile(pod *corev1.Pod, ips []string, clusterDomain string, nodeHosts []byte) string {
	var b strings.Builder
	if pod.Spec.HostNetwork {
		b.WriteString("# Kubernetes-managed hosts file (host network).\n")
		b.Write(nodeHosts)
		if len(nodeHosts) > 0 && nodeHosts[len(nodeHosts)-1] != '\n' {
			b.WriteByte('\n')
		}
	} else {
		b.WriteString("# Kubernetes-managed hosts file.\n" +
			"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
			"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
		host := podHostname(pod)
		for _, ip := range ips {
			if pod.Spec.Subdomain != "" && clusterDomain != "" {
				fmt.Fprintf(&b, "%s\t%s.%s.%s.svc.%s\t%s\n", ip, host, pod.Spec.Subdomain, pod.Namespace, clusterDomain, host)
			} else {
				fmt.Fprintf(&b, "%s\t%s\n", ip, host)
			}
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, ha := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", ha.IP, strings.Join(ha.Hostnames, "\t"))
		}
	}
	return b.String()
}

func podHostname(pod *corev1.Pod) string {
	h := pod.Name
	if pod.Spec.Hostname != "" {
		h = pod.Spec.Hostname
	}
	if len(h) > 63 {
		h = h[:63]
	}
	return h
}

func (m *Manager) podDir(uid types.UID) string {
	return filepath.Join(m.cfg.DataDir, "pods", string(uid))
}

// waitAll marks the pod's containers that have not started as waiting.
func (m *Manager) waitAll(pod *corev1.Pod, ps *podState, reason, msg string) {
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if ps.current(c.Name, false) == nil && ps.current(c.Name, true) == nil {
			ps.waiting[c.Name] = corev1.ContainerStateWaiting{Reason: reason, Message: msg}
		}
	}
}

func gracePeriod(pod *corev1.Pod) time.Duration {
	if pod.DeletionGracePeriodSeconds != nil {
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}
