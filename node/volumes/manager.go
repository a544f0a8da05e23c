package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Config configures a Manager.
type Config struct {
	// PodsDir holds the pods' volumes, <PodsDir>/<pod uid>/volumes/<kind>/<name>,
	// and the bind mounts of their subPaths. Required, absolute; created
	// (0750) if missing. Nothing else may live in it.
	PodsDir string
	// NodeName is the name of this board's Node. Required.
	NodeName string
	// NodeLabels are the labels of this board's Node, which a
	// PersistentVolume's node affinity must match. Default:
	// kubernetes.io/hostname=NodeName, as the agent labels its Node.
	NodeLabels map[string]string
	// Allocatable is the board's allocatable resources: the limit a
	// resourceFieldRef reads for a container (and pod) that sets none.
	// Default: none, so such a limit reads as 0.
	Allocatable corev1.ResourceList
	// Sources gives the ConfigMaps, Secrets, claims and volumes pods refer
	// to. Required.
	Sources Sources
	// Logger receives what the Manager does. Default: slog.Default().
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.PodsDir == "" || !filepath.IsAbs(c.PodsDir):
		return fmt.Errorf("PodsDir %q must be an absolute path", c.PodsDir)
	case c.NodeName == "":
		return errors.New("NodeName is required")
	case c.Sources == nil:
		return errors.New("Sources is required")
	}
	c.PodsDir = filepath.Clean(c.PodsDir)
	if c.NodeLabels == nil {
		c.NodeLabels = map[string]string{corev1.LabelHostname: c.NodeName}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Manager prepares pods' volumes on this board's disk and computes their
// containers' mounts and environment. Its methods may be called for
// different pods at once, but not for one pod at once: the caller
// serializes the work of each pod.
type Manager struct {
	cfg    Config
	log    *slog.Logger
	tokens tokenCache
}

// New checks cfg and makes its PodsDir.
func New(cfg Config) (*Manager, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("volumes: config: %w", err)
	}
	if err := os.MkdirAll(cfg.PodsDir, 0o750); err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	return &Manager{cfg: cfg, log: cfg.Logger}, nil
}

// Paths maps a pod's volume names to the host directory (or, for some
// hostPath volumes, file) to bind into its containers.
type Paths map[string]string

// Disk layout under PodsDir/<uid>.
const (
	volumesDir  = "volumes"
	subPathsDir = "volume-subpaths"

	kindEmptyDir    = "empty-dir"
	kindConfigMap   = "configmap"
	kindSecret      = "secret"
	kindDownwardAPI = "downward-api"
	kindProjected   = "projected"
)

// Setup makes every volume of pod ready and says where each is. It is
// idempotent and meant to be called on every sync of the pod: ConfigMap,
// Secret, downwardAPI and projected volumes are rewritten when, and only
// when, their contents changed, atomically (see doc.go).
//
// An error names the volume and the reason, such as
// `volume "cfg": configmap "app-config" not found`; an optional source
// that is missing gives an empty volume instead.
func (m *Manager) Setup(ctx context.Context, pod *corev1.Pod) (Paths, error) {
	if err := checkPod(pod); err != nil {
		return nil, fmt.Errorf("volumes: setup: %w", err)
	}
	f := newFetcher(ctx, m.cfg.Sources, pod.Namespace)
	paths := make(Paths, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if msgs := validation.IsDNS1123Label(v.Name); len(msgs) > 0 {
			return nil, fmt.Errorf("volumes: pod %s/%s: volume name %q: %s", pod.Namespace, pod.Name, v.Name, msgs[0])
		}
		if _, dup := paths[v.Name]; dup {
			return nil, fmt.Errorf("volumes: pod %s/%s: two volumes are named %q", pod.Namespace, pod.Name, v.Name)
		}
		p, err := m.setupVolume(ctx, f, pod, v)
		if err != nil {
			return nil, fmt.Errorf("volumes: pod %s/%s: volume %q: %w", pod.Namespace, pod.Name, v.Name, err)
		}
		paths[v.Name] = p
	}
	return paths, nil
}

func (m *Manager) setupVolume(ctx context.Context, f *fetcher, pod *corev1.Pod, v *corev1.Volume) (string, error) {
	switch {
	case v.EmptyDir != nil:
		return m.setupEmptyDir(pod, v)
	case v.HostPath != nil:
		return checkHostPath(v.HostPath, 0o755)
	case v.ConfigMap != nil:
		p, err := configMapVolume(f, v.ConfigMap)
		if err != nil {
			return "", err
		}
		return m.setupFiles(pod, kindConfigMap, v.Name, false, p)
	case v.Secret != nil:
		p, err := secretVolume(f, v.Secret)
		if err != nil {
			return "", err
		}
		return m.setupFiles(pod, kindSecret, v.Name, true, p)
	case v.DownwardAPI != nil:
		p, err := m.downwardAPIVolume(pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
		if err != nil {
			return "", err
		}
		return m.setupFiles(pod, kindDownwardAPI, v.Name, false, p)
	case v.Projected != nil:
		p, err := m.projectedVolume(f, pod, v)
		if err != nil {
			return "", err
		}
		return m.setupFiles(pod, kindProjected, v.Name, true, p)
	case v.PersistentVolumeClaim != nil:
		return m.setupClaim(ctx, pod, v.PersistentVolumeClaim.ClaimName, false)
	case v.Ephemeral != nil:
		return m.setupClaim(ctx, pod, pod.Name+"-"+v.Name, true)
	}
	if kind := kindOf(v.VolumeSource); kind != "" {
		return "", fmt.Errorf("kind %s is not supported by isle", kind)
	}
	return "", errors.New("no volume source is set")
}

// setupFiles writes the files of a ConfigMap, Secret, downwardAPI or
// projected volume, on a tmpfs of its own if memory is set.
func (m *Manager) setupFiles(pod *corev1.Pod, kind, name string, memory bool, p payload) (string, error) {
	dir := m.volumeDir(pod.UID, kind, name)
	if err := makeVolumeDir(dir, 0o755); err != nil {
		return "", err
	}
	if memory {
		if err := mountTmpfs(dir, "mode=0755", true); err != nil {
			return "", err
		}
	}
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		// As the kubelet: the pod's fsGroup owns the files and may read them.
		for path, f := range p {
			f.group, f.mode = sc.FSGroup, f.mode|0o440
			p[path] = f
		}
	}
	changed, err := writeAtomic(dir, p)
	if err != nil {
		return "", err
	}
	if changed {
		m.log.Debug("volumes: contents written", "pod", pod.Namespace+"/"+pod.Name, "volume", name, "files", len(p))
	}
	return dir, nil
}

// makeVolumeDir makes a volume's directory, and its parents 0750, and
// gives it mode when it makes it.
func makeVolumeDir(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return err
	}
	err := os.Mkdir(dir, mode)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return os.Chmod(dir, mode) // past the umask
}

// kindOf names the source a VolumeSource or PersistentVolumeSource uses,
// by its JSON field name ("nfs"), or "" if none is set.
func kindOf(src any) string {
	v := reflect.ValueOf(src)
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			return name
		}
	}
	return ""
}

// Teardown unmounts and removes everything of the pod with this uid. It
// works from what is on disk and mounted, not from memory, so it also
// cleans up after an agent restart; calling it again does nothing. It
// removes nothing while something under the pod's directory is still
// mounted, so that the data of a bound subPath is never deleted.
func (m *Manager) Teardown(uid types.UID) error {
	dir, err := m.podDir(uid)
	if err != nil {
		return fmt.Errorf("volumes: teardown: %w", err)
	}
	m.forgetTokens(uid)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := UnmountUnder(dir); err != nil {
		return fmt.Errorf("volumes: teardown of pod %s: %w", uid, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("volumes: teardown of pod %s: %w", uid, err)
	}
	m.log.Debug("volumes: pod torn down", "uid", uid)
	return nil
}

// PodsOnDisk lists the UIDs of the pods that have a directory, so that
// the caller can tear down those deleted while the agent was not running.
func (m *Manager) PodsOnDisk() ([]types.UID, error) {
	entries, err := os.ReadDir(m.cfg.PodsDir)
	if err != nil {
		return nil, fmt.Errorf("volumes: pods on disk: %w", err)
	}
	var uids []types.UID
	for _, e := range entries {
		if e.IsDir() {
			uids = append(uids, types.UID(e.Name()))
		}
	}
	return uids, nil
}

// EmptyDirUsage gives the bytes that each disk-backed emptyDir of the pod
// with this uid uses (allocated blocks, as du counts them; hard links once;
// mounts inside not counted), by volume name. Memory-backed emptyDirs are
// left out: their tmpfs size bounds them. A pod without a directory has
// none.
func (m *Manager) EmptyDirUsage(uid types.UID) (map[string]int64, error) {
	dir, err := m.podDir(uid)
	if err != nil {
		return nil, fmt.Errorf("volumes: emptyDir usage: %w", err)
	}
	dir = filepath.Join(dir, volumesDir, kindEmptyDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("volumes: emptyDir usage: %w", err)
	}
	usage := make(map[string]int64, len(entries))
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		mem, err := isTmpfs(p)
		if err != nil {
			return nil, fmt.Errorf("volumes: emptyDir usage: %w", err)
		}
		if mem {
			continue
		}
		n, err := diskUsage(p)
		if err != nil {
			return nil, fmt.Errorf("volumes: emptyDir usage of %q: %w", e.Name(), err)
		}
		usage[e.Name()] = n
	}
	return usage, nil
}

// podDir is the directory of the pod with this uid, which must be a
// single path element.
func (m *Manager) podDir(uid types.UID) (string, error) {
	if !validUID(uid) {
		return "", fmt.Errorf("pod uid %q is not a valid directory name", uid)
	}
	return filepath.Join(m.cfg.PodsDir, string(uid)), nil
}

// volumeDir is where a volume of a kind lives; uid has been checked.
func (m *Manager) volumeDir(uid types.UID, kind, name string) string {
	return filepath.Join(m.cfg.PodsDir, string(uid), volumesDir, kind, name)
}

// checkPod checks what every entry point relies on.
func checkPod(pod *corev1.Pod) error {
	switch {
	case pod == nil:
		return errors.New("no pod")
	case pod.Namespace == "" || pod.Name == "":
		return fmt.Errorf("pod %q in namespace %q: name and namespace are required", pod.Name, pod.Namespace)
	}
	if !validUID(pod.UID) {
		return fmt.Errorf("pod %s/%s: uid %q is not valid", pod.Namespace, pod.Name, pod.UID)
	}
	return nil
}

// validUID says whether a pod uid can name its directory: one path
// element.
func validUID(uid types.UID) bool {
	s := string(uid)
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}
