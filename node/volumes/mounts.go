package volumes

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Mount is a bind mount of a volume into a container.
type Mount struct {
	Source      string // on the host
	Destination string // in the container, absolute
	ReadOnly    bool
	Propagation string // "" (private), "rslave" or "rshared"
}

// Mounts turns the volumeMounts of container c of pod into bind mounts of
// the paths Setup gave. env is the container's environment, from Env, for
// subPathExpr's $(VAR) references.
//
// A subPath (or expanded subPathExpr) must be relative and without ..;
// it is resolved by the kernel beneath the volume, so that no symlink can
// lead out of it, and bind-mounted from what it resolved to onto
// <PodsDir>/<uid>/volume-subpaths/<volume>/<container>/<index>, which is
// the Source given (see doc.go). A missing subPath is made as a directory,
// except in ConfigMap, Secret, downwardAPI and projected volumes, which
// are always mounted read-only. Call it before each start of the
// container: it replaces its earlier subPath mounts.
func (m *Manager) Mounts(pod *corev1.Pod, c *corev1.Container, paths Paths, env []string) ([]Mount, error) {
	if err := checkPod(pod); err != nil {
		return nil, fmt.Errorf("volumes: mounts: %w", err)
	}
	if c == nil {
		return nil, fmt.Errorf("volumes: mounts of pod %s/%s: no container", pod.Namespace, pod.Name)
	}
	if msgs := validation.IsDNS1123Label(c.Name); len(msgs) > 0 {
		return nil, fmt.Errorf("volumes: mounts of pod %s/%s: container name %q: %s", pod.Namespace, pod.Name, c.Name, msgs[0])
	}
	if len(c.VolumeDevices) > 0 {
		return nil, fmt.Errorf("volumes: container %q: volumeDevices (raw block volumes) are not supported by isle", c.Name)
	}
	mounts := make([]Mount, 0, len(c.VolumeMounts))
	for i := range c.VolumeMounts {
		vm := &c.VolumeMounts[i]
		mt, err := m.mount(pod, c, i, vm, paths, env)
		if err != nil {
			return nil, fmt.Errorf("volumes: container %q: volumeMount %q at %q: %w", c.Name, vm.Name, vm.MountPath, err)
		}
		mounts = append(mounts, mt)
	}
	return mounts, nil
}

func (m *Manager) mount(pod *corev1.Pod, c *corev1.Container, i int, vm *corev1.VolumeMount, paths Paths, env []string) (Mount, error) {
	vi := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
	if vi < 0 {
		return Mount{}, fmt.Errorf("the pod has no volume %q", vm.Name)
	}
	v := &pod.Spec.Volumes[vi]
	src, ok := paths[vm.Name]
	if !ok {
		return Mount{}, fmt.Errorf("volume %q is not set up", vm.Name)
	}
	if !filepath.IsAbs(vm.MountPath) {
		return Mount{}, errors.New("mountPath must be absolute")
	}
	files := v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil
	mt := Mount{
		Source:      src,
		Destination: filepath.Clean(vm.MountPath),
		ReadOnly:    vm.ReadOnly || files || (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly),
	}
	if r := vm.RecursiveReadOnly; r != nil {
		switch *r {
		case corev1.RecursiveReadOnlyDisabled:
		case corev1.RecursiveReadOnlyIfPossible:
			mt.ReadOnly = true // the top of the mount, as Kubernetes without rro
		default:
			return Mount{}, fmt.Errorf("recursiveReadOnly %q is not supported by isle", *r)
		}
	}
	if len(vm.BindMountOptions) > 0 {
		return Mount{}, errors.New("bindMountOptions are not supported by isle")
	}
	if p := vm.MountPropagation; p != nil {
		switch *p {
		case corev1.MountPropagationNone:
		case corev1.MountPropagationHostToContainer:
			mt.Propagation = "rslave"
		case corev1.MountPropagationBidirectional:
			if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
				return Mount{}, errors.New("mountPropagation Bidirectional needs a privileged container")
			}
			mt.Propagation = "rshared"
		default:
			return Mount{}, fmt.Errorf("mountPropagation %q is not supported", *p)
		}
	}
	sub, err := subPath(vm, env)
	if err != nil || sub == "" {
		return mt, err
	}
	target := filepath.Join(m.cfg.PodsDir, string(pod.UID), subPathsDir, vm.Name, c.Name, strconv.Itoa(i))
	if err := bindSubPath(src, sub, target, !files); err != nil {
		return Mount{}, err
	}
	mt.Source = target
	return mt, nil
}

// subPath is the checked, clean subPath of vm, or "" for the whole
// volume.
func subPath(vm *corev1.VolumeMount, env []string) (string, error) {
	sub, what := vm.SubPath, "subPath"
	if vm.SubPathExpr != "" {
		if sub != "" {
			return "", errors.New("subPath and subPathExpr are both set")
		}
		sub, what = expand(vm.SubPathExpr, envMap(env)), "subPathExpr"
	}
	switch {
	case sub == "":
		return "", nil
	case filepath.IsAbs(sub):
		return "", fmt.Errorf("%s %q must be a relative path", what, sub)
	case slices.Contains(strings.Split(sub, "/"), ".."):
		return "", fmt.Errorf("%s %q must not contain ..", what, sub)
	case strings.ContainsRune(sub, 0):
		return "", fmt.Errorf("%s %q contains a NUL byte", what, sub)
	}
	if sub = filepath.Clean(sub); sub == "." {
		return "", nil
	}
	return sub, nil
}
