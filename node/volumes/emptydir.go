package volumes

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// setupEmptyDir makes an emptyDir: a directory (0777, so that containers
// not running as root can write) on the disk, or a tmpfs of its own for
// medium Memory.
func (m *Manager) setupEmptyDir(pod *corev1.Pod, v *corev1.Volume) (string, error) {
	dir := m.volumeDir(pod.UID, kindEmptyDir, v.Name)
	switch v.EmptyDir.Medium {
	case corev1.StorageMediumDefault:
		return dir, makeVolumeDir(dir, 0o777)
	case corev1.StorageMediumMemory:
		if err := makeVolumeDir(dir, 0o777); err != nil {
			return "", err
		}
		var opts string
		if size, ok := memoryEmptyDirSize(pod, v.EmptyDir); ok {
			opts = "size=" + strconv.FormatInt(size, 10)
		}
		return dir, mountTmpfs(dir, opts, false)
	}
	return "", fmt.Errorf("emptyDir medium %q is not supported by isle", v.EmptyDir.Medium)
}

// memoryEmptyDirSize is the size of a memory-backed emptyDir's tmpfs: its
// sizeLimit, or the pod's memory limit if that is smaller or there is no
// sizeLimit. Without either, ok is false and the tmpfs has the kernel's
// default size (half the RAM); what containers write there still counts
// against their memory.
func memoryEmptyDirSize(pod *corev1.Pod, ed *corev1.EmptyDirVolumeSource) (size int64, ok bool) {
	limit, limited := podMemoryLimit(pod)
	if ed.SizeLimit != nil && ed.SizeLimit.Sign() > 0 {
		size, ok = ed.SizeLimit.Value(), true
		if limited && limit < size {
			size = limit
		}
		return size, ok
	}
	return limit, limited
}

// podMemoryLimit is the memory limit of the pod as Kubernetes counts it:
// the pod-level limit if set, else the largest of what runs at once
// (containers and sidecars together, or an init container with the
// sidecars started before it). ok is false if a container has no limit.
func podMemoryLimit(pod *corev1.Pod) (limit int64, ok bool) {
	if pod.Spec.Resources != nil {
		if q, ok := pod.Spec.Resources.Limits[corev1.ResourceMemory]; ok {
			return q.Value(), true
		}
	}
	var sidecars, initPeak int64
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		q, ok := c.Resources.Limits[corev1.ResourceMemory]
		if !ok {
			return 0, false
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars += q.Value()
			initPeak = max(initPeak, sidecars)
		} else {
			initPeak = max(initPeak, sidecars+q.Value())
		}
	}
	sum := sidecars
	for i := range pod.Spec.Containers {
		q, ok := pod.Spec.Containers[i].Resources.Limits[corev1.ResourceMemory]
		if !ok {
			return 0, false
		}
		sum += q.Value()
	}
	return max(sum, initPeak), true
}
