package volumes

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fakeSources is Sources over maps, keyed namespace/name (volumes by name).
type fakeSources struct {
	mu         sync.Mutex
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
	claims     map[string]*corev1.PersistentVolumeClaim
	volumes    map[string]*corev1.PersistentVolume
	services   []*corev1.Service
	// servicesErr, if set, is what Services answers (not read yet).
	servicesErr error
	gets        int
	// tokens counts the tokens issued; tokenErr, if set, is what Token
	// answers.
	tokens   int
	tokenErr error
}

var _ Sources = (*fakeSources)(nil)

func newFakeSources() *fakeSources {
	return &fakeSources{
		configMaps: map[string]*corev1.ConfigMap{},
		secrets:    map[string]*corev1.Secret{},
		claims:     map[string]*corev1.PersistentVolumeClaim{},
		volumes:    map[string]*corev1.PersistentVolume{},
	}
}

func get[T any](s *fakeSources, m map[string]*T, key, resource string) (*T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets++
	if o, ok := m[key]; ok {
		return o, nil
	}
	_, name, _ := strings.Cut(key, "/")
	if name == "" {
		name = key
	}
	return nil, apierrors.NewNotFound(corev1.Resource(resource), name)
}

func (s *fakeSources) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return get(s, s.configMaps, ns+"/"+name, "configmaps")
}

func (s *fakeSources) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	return get(s, s.secrets, ns+"/"+name, "secrets")
}

func (s *fakeSources) PersistentVolumeClaim(_ context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	return get(s, s.claims, ns+"/"+name, "persistentvolumeclaims")
}

func (s *fakeSources) PersistentVolume(_ context.Context, name string) (*corev1.PersistentVolume, error) {
	return get(s, s.volumes, name, "persistentvolumes")
}

func (s *fakeSources) Services(context.Context) ([]*corev1.Service, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.services, s.servicesErr
}

func (s *fakeSources) Token(_ context.Context, pod *corev1.Pod, audience string, seconds int64) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokenErr != nil {
		return "", time.Time{}, s.tokenErr
	}
	s.tokens++
	return fmt.Sprintf("token-%d-%s-%s", s.tokens, pod.UID, audience), time.Now().Add(time.Duration(seconds) * time.Second), nil
}

func (s *fakeSources) addConfigMap(name string, data map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.configMaps["default/"+name] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: data}
}

func (s *fakeSources) addSecret(name string, data map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := map[string][]byte{}
	for k, v := range data {
		b[k] = []byte(v)
	}
	s.secrets["default/"+name] = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: b}
}

// newManager is a Manager on a temporary PodsDir whose mounts are detached
// when the test ends; logs go to the returned buffer.
func newManager(t *testing.T, src Sources) (*Manager, *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() {
		if err := UnmountUnder(dir); err != nil && os.Geteuid() == 0 {
			t.Errorf("cleanup: %v", err)
		}
	})
	logs := &syncBuffer{}
	m, err := New(Config{
		PodsDir:     filepath.Join(dir, "pods"),
		NodeName:    "pi1",
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Sources:     src,
		Logger:      slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, logs
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

var (
	mountOnce sync.Once
	mountErr  error
)

// needMounts skips the test (fails it under CI) where tmpfs cannot be
// mounted: not root, or no CAP_SYS_ADMIN.
func needMounts(t *testing.T) {
	t.Helper()
	mountOnce.Do(func() {
		dir, err := os.MkdirTemp("", "volumes-probe")
		if err != nil {
			mountErr = err
			return
		}
		defer os.Remove(dir)
		if mountErr = mountTmpfs(dir, "size=64k", false); mountErr == nil {
			mountErr = UnmountUnder(dir)
		}
	})
	if mountErr == nil {
		return
	}
	msg := "this test mounts tmpfs and bind mounts: run it as root (with CAP_SYS_ADMIN): " + mountErr.Error()
	if os.Getenv("CI") == "" {
		t.Skip(msg)
	}
	t.Fatal(msg)
}

func testPod(volumes ...corev1.Volume) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: types.UID("uid-1"),
			Labels: map[string]string{"app": "web", "tier": "front"}, Annotations: map[string]string{"note": `say "hi"`}},
		Spec: corev1.PodSpec{
			NodeName:           "pi1",
			ServiceAccountName: "default",
			Volumes:            volumes,
			Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			}}},
		},
		Status: corev1.PodStatus{
			PodIP: "10.42.1.5", PodIPs: []corev1.PodIP{{IP: "10.42.1.5"}, {IP: "fd00::5"}},
			HostIP: "192.168.1.10", HostIPs: []corev1.HostIP{{IP: "192.168.1.10"}},
		},
	}
}

func vol(name string, src corev1.VolumeSource) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: src}
}

func mode(fi os.FileInfo) os.FileMode { return fi.Mode().Perm() }

func mustWrite(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// readVolume reads the user-visible files of a volume: name → contents,
// following the symlinks, skipping the ..names.
func readVolume(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		top := filepath.Join(dir, e.Name())
		fi, err := os.Stat(top) // through the symlink
		if err != nil {
			t.Fatal(err)
		}
		if !fi.IsDir() {
			b, err := os.ReadFile(top)
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = string(b)
			continue
		}
		err = filepath.WalkDir(top+"/", func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			out[rel] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
