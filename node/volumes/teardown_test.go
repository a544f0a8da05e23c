//go:build linux

package volumes

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// TestTeardownAfterRestart sets a pod up with every kind of mount, then
// tears it down with a new Manager on the same directory, as after an
// agent restart.
func TestTeardownAfterRestart(t *testing.T) {
	requireOpenat2(t)
	needMounts(t)
	src := newFakeSources()
	src.addSecret("creds", map[string]string{"password": "pw"})
	m, _ := newManager(t, src)
	host := t.TempDir()
	mustWrite(t, filepath.Join(host, "precious"), "keep me")
	pod := testPod(
		vol("mem", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}),
		vol("disk", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
		vol("creds", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}),
		vol("host", corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host}}),
	)
	other := testPod(vol("disk", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}))
	other.UID = "uid-2"
	paths, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Setup(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	c := &corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{
		{Name: "host", MountPath: "/h", SubPath: "."},
		{Name: "host", MountPath: "/p", SubPath: "precious"},
	}}
	if _, err := m.Mounts(pod, c, paths, nil); err != nil {
		t.Fatal(err)
	}
	podDir := filepath.Join(m.cfg.PodsDir, "uid-1")
	if points, _ := mountsUnder(podDir); len(points) != 3 { // mem, creds, the precious file
		t.Fatalf("mounts before teardown: %q", points)
	}

	restarted, err := New(m.cfg)
	if err != nil {
		t.Fatal(err)
	}
	uids, err := restarted.PodsOnDisk()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(uids)
	if !slices.Equal(uids, []types.UID{"uid-1", "uid-2"}) {
		t.Errorf("PodsOnDisk = %q", uids)
	}
	for range 2 {
		if err := restarted.Teardown("uid-1"); err != nil {
			t.Fatal(err)
		}
	}
	if points, err := mountsUnder(podDir); err != nil || len(points) != 0 {
		t.Errorf("mounts left: %q %v", points, err)
	}
	if _, err := os.Lstat(podDir); !os.IsNotExist(err) {
		t.Errorf("the pod's directory is still there: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(host, "precious")); err != nil || string(b) != "keep me" {
		t.Errorf("the hostPath file bound by a subPath was harmed: %q %v", b, err)
	}
	if uids, _ := restarted.PodsOnDisk(); !slices.Equal(uids, []types.UID{"uid-2"}) {
		t.Errorf("PodsOnDisk after teardown = %q", uids)
	}
	if err := restarted.Teardown("../pods"); err == nil {
		t.Error("Teardown accepted a uid that is a path")
	}
}

func TestEmptyDirUsage(t *testing.T) {
	needMounts(t)
	m, _ := newManager(t, newFakeSources())
	pod := testPod(
		vol("disk", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr(resource.MustParse("1Mi"))}}),
		vol("empty", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
		vol("mem", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}),
	)
	paths, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	const size = 3 << 20
	big := make([]byte, size)
	for i := range big {
		big[i] = byte(i)
	}
	if err := os.MkdirAll(filepath.Join(paths["disk"], "a/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(paths["disk"], "a/b/big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(paths["disk"], "a/b/big"), filepath.Join(paths["disk"], "again")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(paths["mem"], "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	usage, err := m.EmptyDirUsage(pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	if len(usage) != 2 || usage["disk"] < size || usage["disk"] > size+(1<<20) || usage["empty"] > 64<<10 {
		t.Errorf("usage %v, want disk about %d (the hard link once), empty about 0, mem left out", usage, size)
	}
	if usage, err := m.EmptyDirUsage("no-such-pod"); err != nil || len(usage) != 0 {
		t.Errorf("a pod without a directory: %v %v", usage, err)
	}
}
