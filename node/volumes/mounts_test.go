//go:build linux

package volumes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	corev1 "k8s.io/api/core/v1"
)

func TestMounts(t *testing.T) {
	requireOpenat2(t)
	needMounts(t)
	src := newFakeSources()
	src.addConfigMap("cfg", map[string]string{"app.conf": "port=80"})
	m, _ := newManager(t, src)
	host := t.TempDir()
	propagation := func(p corev1.MountPropagationMode) *corev1.MountPropagationMode { return &p }
	pod := testPod(
		vol("data", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
		vol("cfg", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}),
		vol("host", corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host}}),
	)
	paths, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []corev1.VolumeMount{
		{Name: "data", MountPath: "/data/"},
		{Name: "data", MountPath: "/var/log/app", SubPath: "logs/app"},
		{Name: "cfg", MountPath: "/etc/app.conf", SubPath: "app.conf"},
		{Name: "data", MountPath: "/per-pod", SubPathExpr: "pods/$(POD_NAME)"},
		{Name: "host", MountPath: "/host", ReadOnly: true, MountPropagation: propagation(corev1.MountPropagationHostToContainer)},
		{Name: "cfg", MountPath: "/cfg"},
	}
	env := []string{"POD_NAME=other", "POD_NAME=web"} // the last one counts
	// A container restart mounts the subPaths again.
	for range 2 {
		mounts, err := m.Mounts(pod, c, paths, env)
		if err != nil {
			t.Fatal(err)
		}
		sub := func(i int) string {
			return filepath.Join(m.cfg.PodsDir, "uid-1", "volume-subpaths", c.VolumeMounts[i].Name, "app", string(rune('0'+i)))
		}
		want := []Mount{
			{Source: paths["data"], Destination: "/data"},
			{Source: sub(1), Destination: "/var/log/app"},
			{Source: sub(2), Destination: "/etc/app.conf", ReadOnly: true},
			{Source: sub(3), Destination: "/per-pod"},
			{Source: host, Destination: "/host", ReadOnly: true, Propagation: "rslave"},
			{Source: paths["cfg"], Destination: "/cfg", ReadOnly: true},
		}
		if len(mounts) != len(want) {
			t.Fatalf("mounts %+v", mounts)
		}
		for i := range want {
			if mounts[i] != want[i] {
				t.Errorf("mount %d: %+v, want %+v", i, mounts[i], want[i])
			}
		}
	}
	// The subPath binds are real, and what was missing was made in the volume.
	mustWrite(t, filepath.Join(m.cfg.PodsDir, "uid-1/volume-subpaths/data/app/1/x.log"), "line")
	if b, err := os.ReadFile(filepath.Join(paths["data"], "logs/app/x.log")); err != nil || string(b) != "line" {
		t.Errorf("a write through the subPath bind: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(m.cfg.PodsDir, "uid-1/volume-subpaths/cfg/app/2")); err != nil || string(b) != "port=80" {
		t.Errorf("the configMap file bind reads %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(paths["data"], "pods/web")); err != nil || !fi.IsDir() {
		t.Errorf("subPathExpr directory: %v %v", fi, err)
	}
	points, err := mountsUnder(filepath.Join(m.cfg.PodsDir, "uid-1", "volume-subpaths"))
	if err != nil || len(points) != 3 {
		t.Errorf("subPath mounts after two calls: %q %v, want 3", points, err)
	}
	// A subPath missing from a configMap volume is not made there.
	c.VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/x", SubPath: "nope"}}
	if _, err := m.Mounts(pod, c, paths, env); err == nil || !strings.Contains(err.Error(), `subPath "nope": no such file or directory`) {
		t.Errorf("missing configMap subPath: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(paths["cfg"], "nope")); err == nil {
		t.Error("a missing subPath was made in a configMap volume")
	}
}

func TestSubPathEscapes(t *testing.T) {
	requireOpenat2(t)
	needMounts(t)
	m, _ := newManager(t, newFakeSources())
	outside := t.TempDir()
	pod := testPod(vol("data", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}))
	paths, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	data := paths["data"]
	// What a container could plant in a volume it writes.
	for name, target := range map[string]string{
		"abs":    outside,
		"etc":    "/etc",
		"up":     "../../../../../../..",
		"hop":    "up",
		"nested": "logs/../../..",
		"inside": "logs",
		"loop":   "loop",
	} {
		if err := os.Symlink(target, filepath.Join(data, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(data, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sub, expr, want string
	}{
		{sub: "../x", want: `subPath "../x" must not contain ..`},
		{sub: "a/../../x", want: `must not contain ..`},
		{sub: "/etc", want: `subPath "/etc" must be a relative path`},
		{sub: "abs", want: `resolves outside the volume`},
		{sub: "abs/new", want: `resolves outside the volume`},
		{sub: "etc/passwd", want: `resolves outside the volume`},
		{sub: "up", want: `resolves outside the volume`},
		{sub: "hop/etc", want: `resolves outside the volume`},
		{sub: "nested", want: `resolves outside the volume`},
		{sub: "loop", want: `resolves outside the volume`},
		{expr: "$(ESCAPE)", want: `subPathExpr "../etc" must not contain ..`},
		{expr: "$(ROOT)", want: `subPathExpr "/" must be a relative path`},
		{sub: "inside"}, // a symlink inside the volume is fine
		{sub: "logs/./new/"},
	} {
		c := &corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/m", SubPath: tc.sub, SubPathExpr: tc.expr}}}
		_, err := m.Mounts(pod, c, paths, []string{"ESCAPE=../etc", "ROOT=/"})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.sub, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q%q: err %v, want %q", tc.sub, tc.expr, err, tc.want)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("an escaping subPath made %v outside the volume", entries)
	}
	if _, err := os.Stat(filepath.Join(data, "logs/new")); err != nil {
		t.Errorf("the missing subPath inside was not made: %v", err)
	}
}

func TestMountErrors(t *testing.T) {
	src := newFakeSources()
	src.addConfigMap("cfg", map[string]string{"k": "v"})
	m, _ := newManager(t, src)
	pod := testPod(
		vol("data", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
		vol("claim", corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "x", ReadOnly: true}}),
	)
	paths := Paths{"data": "/somewhere", "claim": "/claim"}
	bidi, rro := corev1.MountPropagationBidirectional, corev1.RecursiveReadOnlyEnabled
	for _, tc := range []struct {
		name string
		c    corev1.Container
		want string
	}{
		{"no volume", corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "nope", MountPath: "/m"}}},
			`volumes: container "app": volumeMount "nope" at "/m": the pod has no volume "nope"`},
		{"whole volume", corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/m"}}},
			""},
		{"relative mountPath", corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "m"}}},
			`mountPath must be absolute`},
		{"bidirectional", corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/m", MountPropagation: &bidi}}},
			`mountPropagation Bidirectional needs a privileged container`},
		{"both subPaths", corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/m", SubPath: "a", SubPathExpr: "b"}}},
			`subPath and subPathExpr are both set`},
		{"recursive read-only", corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/m", ReadOnly: true, RecursiveReadOnly: &rro}}},
			`recursiveReadOnly "Enabled" is not supported by isle`},
		{"block device", corev1.Container{Name: "app", VolumeDevices: []corev1.VolumeDevice{{Name: "data", DevicePath: "/dev/x"}}},
			`volumeDevices (raw block volumes) are not supported by isle`},
		{"bad container name", corev1.Container{Name: "../app"}, `container name "../app"`},
	} {
		mounts, err := m.Mounts(pod, &tc.c, paths, nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err %v (mounts %v), want %q", tc.name, err, mounts, tc.want)
		}
	}
	delete(paths, "data")
	c := &corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/m"}}}
	if _, err := m.Mounts(pod, c, paths, nil); err == nil || !strings.Contains(err.Error(), `volume "data" is not set up`) {
		t.Errorf("a volume Setup did not give: %v", err)
	}
	privileged := true
	c = &corev1.Container{Name: "app", SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
		VolumeMounts: []corev1.VolumeMount{{Name: "claim", MountPath: "/c", MountPropagation: &bidi}}}
	mounts, err := m.Mounts(pod, c, paths, nil)
	if err != nil || len(mounts) != 1 || mounts[0] != (Mount{Source: "/claim", Destination: "/c", ReadOnly: true, Propagation: "rshared"}) {
		t.Errorf("privileged bidirectional read-only claim: %+v %v", mounts, err)
	}
}

// requireOpenat2 skips a test of subPath resolution where the kernel
// interface it needs is missing: user-mode emulation of 32-bit ARM (the
// ARM test runs) has no openat2. The native runs test it.
func requireOpenat2(t *testing.T) {
	t.Helper()
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC})
	if err == nil {
		unix.Close(fd)
	}
	if err == unix.ENOSYS {
		t.Skip("openat2 is not available here (user-mode emulation): subPath resolution is tested in the native run")
	}
}
