package pods

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/isle-cluster/isle/node/containers"
	"github.com/isle-cluster/isle/node/volumes"
)

// startContainer starts attempt n of container c. A failure is recorded
// as the container's waiting reason (and an event); the returned delay is
// when to try again (image pull back-off), 0 for no need.
func (m *Manager) startContainer(ctx context.Context, pod *corev1.Pod, ps *podState, c *corev1.Container, init bool,
	paths volumes.Paths, n int) time.Duration {
	if d, wait := m.startBackoff(pod, ps, c); wait {
		return d
	}
	if _, ok := ps.waiting[c.Name]; !ok || ps.waiting[c.Name].Reason == "CrashLoopBackOff" {
		ps.waiting[c.Name] = corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	}
	start := time.Now()
	img, err := m.rt.EnsureImage(ctx, c.Image, c.ImagePullPolicy, m.pullCredentials(ctx, pod))
	if err != nil {
		return m.pullFailed(pod, ps, c, err)
	}
	if img.Pulled {
		m.events.normal(pod, "Pulled", fmt.Sprintf("Successfully pulled image %q in %s", c.Image, time.Since(start).Round(time.Millisecond)))
	} else {
		m.events.normal(pod, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image))
	}

	spec, err := m.containerSpec(ctx, pod, ps, c, init, paths, n, img)
	if err != nil {
		return m.startFailed(pod, ps, c, "CreateContainerConfigError", err.Error(), err.Error())
	}
	err = m.rt.Create(ctx, spec)
	if err == nil {
		m.events.normal(pod, "Created", "Created container "+c.Name)
		err = m.rt.Start(ctx, spec.ID)
	}
	if rerr := m.refresh(ctx, ps, spec.ID); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		if errors.Is(err, containers.ErrStartFailed) {
			delete(ps.waiting, c.Name) // recorded: an exited container with reason StartError
			m.events.warning(pod, "Failed", "Error: "+strings.TrimPrefix(err.Error(), "containers: "+spec.ID+": "))
			return 0
		}
		return m.startFailed(pod, ps, c, "CreateContainerError", err.Error(), err.Error())
	}
	delete(ps.waiting, c.Name)
	delete(ps.backoff, "start/"+c.Name)
	m.events.normal(pod, "Started", "Started container "+c.Name)
	m.activity()
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		m.postStart(ctx, pod, ps, c, spec.ID)
	}
	return 0
}

// startBackoff holds back a container whose start failed before it ran
// (its image did not pull, its configuration was wrong): it waits out a
// back-off, in ImagePullBackOff after a failed pull.
func (m *Manager) startBackoff(pod *corev1.Pod, ps *podState, c *corev1.Container) (time.Duration, bool) {
	b := ps.backoff["start/"+c.Name]
	if b == nil || !time.Now().Before(b.until) {
		return 0, false
	}
	if w := ps.waiting[c.Name]; w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff" {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		if w.Reason != "ImagePullBackOff" {
			m.events.normal(pod, "BackOff", msg)
		}
		ps.waiting[c.Name] = corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: msg}
	}
	return time.Until(b.until), true
}

// startFailed records why a container did not start (reason, msg) and
// backs off its next try; an event says "Error: "+event.
func (m *Manager) startFailed(pod *corev1.Pod, ps *podState, c *corev1.Container, reason, msg, event string) time.Duration {
	if w := ps.waiting[c.Name]; w.Reason != reason || w.Message != msg {
		m.events.warning(pod, "Failed", "Error: "+event)
	}
	ps.waiting[c.Name] = corev1.ContainerStateWaiting{Reason: reason, Message: msg}
	b := ps.backoff["start/"+c.Name]
	if b == nil {
		b = &backoff{}
		ps.backoff["start/"+c.Name] = b
	}
	b.next(time.Now(), 0)
	return b.delay
}

func (m *Manager) pullFailed(pod *corev1.Pod, ps *podState, c *corev1.Container, err error) time.Duration {
	reason := "ErrImagePull"
	switch {
	case errors.Is(err, containers.ErrImageNeverPull):
		reason = "ErrImageNeverPull"
	case errors.Is(err, containers.ErrInvalidImage):
		reason = "InvalidImageName"
	}
	msg := strings.TrimPrefix(err.Error(), reason+": ")
	m.events.warning(pod, "Failed", "Failed to pull image \""+c.Image+"\": "+msg)
	return m.startFailed(pod, ps, c, reason, msg, reason)
}

// pullCredentials are the registry credentials of the pod's
// imagePullSecrets; a missing or malformed secret is logged and skipped,
// as the kubelet does (the pull then fails with the registry's message).
func (m *Manager) pullCredentials(ctx context.Context, pod *corev1.Pod) containers.Credentials {
	if len(pod.Spec.ImagePullSecrets) == 0 {
		return nil
	}
	src := apiSources{m.cfg.Client, m.services}
	var configs []map[string]containers.DockerAuth
	for _, ref := range pod.Spec.ImagePullSecrets {
		s, err := src.Secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) {
				m.events.warning(pod, "FailedToRetrieveImagePullSecret", fmt.Sprintf("Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", ref.Name))
			}
			continue
		}
		data := s.Data[corev1.DockerConfigJsonKey]
		if data == nil {
			data = s.Data[corev1.DockerConfigKey]
		}
		cfg, err := containers.ParseDockerConfig(data)
		if err != nil {
			m.log.Warn("pods: image pull secret", "secret", pod.Namespace+"/"+ref.Name, "err", err)
			continue
		}
		configs = append(configs, cfg)
	}
	return containers.CredentialsFrom(configs...)
}

// containerSpec computes the runtime's spec of a container.
func (m *Manager) containerSpec(ctx context.Context, pod *corev1.Pod, ps *podState, c *corev1.Container, init bool,
	paths volumes.Paths, n int, img containers.Image) (containers.Spec, error) {
	withIPs := pod.DeepCopy()
	m.fillIPs(withIPs, ps)
	env, err := m.vol.Env(ctx, withIPs, c)
	if err != nil {
		return containers.Spec{}, err
	}
	mounts, err := m.vol.Mounts(pod, c, paths, env)
	if err != nil {
		return containers.Spec{}, err
	}
	s := containers.Spec{
		ID:    containers.NewID(),
		Image: img.Ref,
		Labels: map[string]string{
			labelPodUID: string(pod.UID), labelPodNamespace: pod.Namespace, labelPodName: pod.Name,
			labelContainer: c.Name, labelAttempt: strconv.Itoa(n), labelHash: specHash(c), labelImageID: img.ID,
		},
		Command: volumes.ExpandArgs(c.Command, env), Args: volumes.ExpandArgs(c.Args, env), Env: env, WorkingDir: c.WorkingDir,
		Hostname:     podHostname(pod),
		TTY:          c.TTY,
		Stdin:        c.Stdin,
		StdinOnce:    c.StdinOnce,
		CgroupParent: m.podCgroup(pod.UID),
		LogPath:      m.logPath(pod.Namespace, pod.Name, pod.UID, c.Name, n),
		Group:        string(pod.UID),
		Sysctls:      podSysctls(pod),
	}
	if init {
		s.Labels[labelInit] = "true"
	}
	if pod.Spec.HostNetwork {
		s.Labels[labelHostNetwork] = "true"
	} else {
		s.NetNS = ps.netns
	}
	// The pod's files, then the volumes (which may cover them, as a
	// volume mounted on /etc does).
	dir := m.podDir(pod.UID)
	s.Mounts = append(s.Mounts, containers.Mount{Source: filepath.Join(dir, "hosts"), Destination: "/etc/hosts"},
		containers.Mount{Source: filepath.Join(dir, "hostname"), Destination: "/etc/hostname"},
		containers.Mount{Source: filepath.Join(dir, "resolv.conf"), Destination: "/etc/resolv.conf", ReadOnly: true})
	if tm := c.TerminationMessagePath; tm != "" {
		f := filepath.Join(dir, "termination", c.Name+"-"+strconv.Itoa(n))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return s, fmt.Errorf("pods: termination message file: %w", err)
		}
		// Writable by any user the container runs as, past the umask.
		if err := os.WriteFile(f, nil, 0o666); err != nil {
			return s, fmt.Errorf("pods: termination message file: %w", err)
		}
		if err := os.Chmod(f, 0o666); err != nil {
			return s, fmt.Errorf("pods: termination message file: %w", err)
		}
		s.Mounts = append(s.Mounts, containers.Mount{Source: f, Destination: tm})
	}
	for _, vm := range mounts {
		s.Mounts = append(s.Mounts, containers.Mount{Source: vm.Source, Destination: vm.Destination, ReadOnly: vm.ReadOnly, Propagation: vm.Propagation})
	}
	applyResources(&s, c)
	if err := applySecurity(&s, pod, c); err != nil {
		return s, err
	}
	return s, nil
}

func (m *Manager) fillIPs(pod *corev1.Pod, ps *podState) {
	pod.Status.HostIP = m.cfg.NodeIP
	pod.Status.HostIPs = []corev1.HostIP{{IP: m.cfg.NodeIP}}
	pod.Status.PodIP, pod.Status.PodIPs = "", nil
	for i, ip := range ps.ips {
		if i == 0 {
			pod.Status.PodIP = ip
		}
		pod.Status.PodIPs = append(pod.Status.PodIPs, corev1.PodIP{IP: ip})
	}
}

// logPath is where attempt n of a container logs, as the kubelet lays
// it out: <logs>/<ns>_<pod>_<uid>/<container>/<n>.log.
func (m *Manager) logPath(ns, name string, uid any, container string, n int) string {
	return filepath.Join(m.podLogDir(ns, name, fmt.Sprint(uid)), container, strconv.Itoa(n)+".log")
}

func (m *Manager) podLogDir(ns, name, uid string) string {
	return filepath.Join(m.cfg.DataDir, "logs", ns+"_"+name+"_"+uid)
}

// applyResources turns requests and limits into cgroup settings as the
// kubelet does: shares from the CPU request (2 for none), a CFS quota
// from the CPU limit, the memory limit as is.
func applyResources(s *containers.Spec, c *corev1.Container) {
	cpuReq := c.Resources.Requests.Cpu()
	if cpuReq.IsZero() {
		cpuReq = c.Resources.Limits.Cpu()
	}
	s.CPUShares = max(2, uint64(cpuReq.MilliValue()*1024/1000))
	if lim := c.Resources.Limits.Cpu(); !lim.IsZero() {
		s.CPUPeriod = 100000
		s.CPUQuota = max(1000, lim.MilliValue()*100000/1000)
	}
	if lim := c.Resources.Limits.Memory(); !lim.IsZero() {
		s.MemoryLimit = lim.Value()
	}
}

// applySecurity applies the pod's and the container's securityContext
// (the container's winning).
func applySecurity(s *containers.Spec, pod *corev1.Pod, c *corev1.Container) error {
	if psc := pod.Spec.SecurityContext; psc != nil {
		s.RunAsUser, s.RunAsGroup = psc.RunAsUser, psc.RunAsGroup
		s.SupplementalGroups = psc.SupplementalGroups
		// The fsGroup owns the pod's volumes: its processes are in it.
		if g := psc.FSGroup; g != nil && !slices.Contains(s.SupplementalGroups, *g) {
			s.SupplementalGroups = append(slices.Clone(s.SupplementalGroups), *g)
		}
		if psc.RunAsNonRoot != nil && *psc.RunAsNonRoot && s.RunAsUser != nil && *s.RunAsUser == 0 {
			return errors.New("container's runAsUser breaks non-root policy")
		}
	}
	sc := c.SecurityContext
	if sc == nil {
		return nil
	}
	if sc.RunAsUser != nil {
		s.RunAsUser = sc.RunAsUser
	}
	if sc.RunAsGroup != nil {
		s.RunAsGroup = sc.RunAsGroup
	}
	nonRoot := sc.RunAsNonRoot != nil && *sc.RunAsNonRoot
	if pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.RunAsNonRoot != nil && sc.RunAsNonRoot == nil {
		nonRoot = *pod.Spec.SecurityContext.RunAsNonRoot
	}
	if nonRoot && (s.RunAsUser == nil || *s.RunAsUser == 0) {
		return errors.New("container has runAsNonRoot and its user is root or not numeric: set securityContext.runAsUser")
	}
	if sc.ReadOnlyRootFilesystem != nil {
		s.ReadOnlyRootFS = *sc.ReadOnlyRootFilesystem
	}
	if sc.Privileged != nil {
		s.Privileged = *sc.Privileged
	}
	if sc.Capabilities != nil {
		for _, cp := range sc.Capabilities.Add {
			s.AddCaps = append(s.AddCaps, string(cp))
		}
		for _, cp := range sc.Capabilities.Drop {
			s.DropCaps = append(s.DropCaps, string(cp))
		}
	}
	s.AllowPrivilegeEsc = sc.AllowPrivilegeEscalation
	return nil
}
