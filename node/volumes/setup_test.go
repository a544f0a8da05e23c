//go:build linux

package volumes

import (
	"context"
	"errors"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"golang.org/x/sys/unix"
)

func TestEmptyDir(t *testing.T) {
	m, _ := newManager(t, newFakeSources())
	paths, err := m.Setup(context.Background(), testPod(vol("scratch", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}})))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(m.cfg.PodsDir, "uid-1", "volumes", "empty-dir", "scratch")
	if paths["scratch"] != want {
		t.Fatalf("path %q, want %q", paths["scratch"], want)
	}
	fi, err := os.Stat(want)
	if err != nil || !fi.IsDir() || mode(fi) != 0o777 {
		t.Fatalf("emptyDir: %v %v, want a directory 0777", fi, err)
	}
	if err := os.WriteFile(filepath.Join(want, "kept"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Setup(context.Background(), testPod(vol("scratch", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}))); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(want, "kept")); err != nil {
		t.Errorf("a second Setup lost the emptyDir's contents: %v", err)
	}
	_, err = m.Setup(context.Background(), testPod(vol("huge", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumHugePages}})))
	if err == nil || !strings.Contains(err.Error(), `volume "huge": emptyDir medium "HugePages" is not supported by isle`) {
		t.Errorf("hugepages: %v", err)
	}
}

func TestEmptyDirMemory(t *testing.T) {
	needMounts(t)
	m, _ := newManager(t, newFakeSources())
	mem := func(limit string) corev1.VolumeSource {
		ed := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
		if limit != "" {
			ed.SizeLimit = ptr(resource.MustParse(limit))
		}
		return corev1.VolumeSource{EmptyDir: ed}
	}
	pod := testPod(vol("limited", mem("4Mi")), vol("by-pod", mem("")), vol("smaller-pod", mem("64Mi")))
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Mi")}
	for range 2 { // the second Setup must not mount again
		paths, err := m.Setup(context.Background(), pod)
		if err != nil {
			t.Fatal(err)
		}
		for name, size := range map[string]string{"limited": "size=4096k", "by-pod": "size=8192k", "smaller-pod": "size=8192k"} {
			fstype, opts, ok := mountOf(t, paths[name])
			if !ok || fstype != "tmpfs" || !strings.Contains(opts, size) {
				t.Errorf("%s: mount %v %q %q, want tmpfs with %s", name, ok, fstype, opts, size)
			}
		}
	}
	points, err := mountsUnder(filepath.Join(m.cfg.PodsDir, "uid-1"))
	if err != nil || len(points) != 3 {
		t.Errorf("mounts after two Setups: %q %v, want 3", points, err)
	}
}

func TestHostPath(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "file"), "x")
	if err := os.Mkdir(filepath.Join(dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	canMknod := unix.Mknod(filepath.Join(dir, "blk"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 200))) == nil
	m, _ := newManager(t, newFakeSources())
	for _, tc := range []struct {
		path string
		typ  corev1.HostPathType
		want string // error, or "" for success
	}{
		{"dir", "", ""},
		{"nothing", "", ""}, // no check at all
		{"dir", corev1.HostPathDirectory, ""},
		{"file", corev1.HostPathDirectory, "is not a directory"},
		{"nothing", corev1.HostPathDirectory, "is not a directory"},
		{"new/deeper", corev1.HostPathDirectoryOrCreate, ""},
		{"file", corev1.HostPathDirectoryOrCreate, "is not a directory"},
		{"file", corev1.HostPathFile, ""},
		{"dir", corev1.HostPathFile, "is not a file"},
		{"newfile", corev1.HostPathFileOrCreate, ""},
		{"nodir/newfile", corev1.HostPathFileOrCreate, "no such file or directory"},
		{"dir", corev1.HostPathFileOrCreate, "is not a file"},
		{"sock", corev1.HostPathSocket, ""},
		{"file", corev1.HostPathSocket, "is not a socket file"},
		{"/dev/null", corev1.HostPathCharDev, ""},
		{"file", corev1.HostPathCharDev, "is not a character device"},
		{"/dev/null", corev1.HostPathBlockDev, "is not a block device"},
		{"blk", corev1.HostPathBlockDev, ""},
		{"file", "Pipe", `hostPath type "Pipe" is not supported`},
		{"relative", "", "must be an absolute path"},
		{"dir/../file", "", "must be an absolute path without .."},
	} {
		p := tc.path
		if !filepath.IsAbs(p) && p != "relative" {
			p = dir + "/" + p
		}
		if tc.path == "blk" && !canMknod {
			continue
		}
		typ := tc.typ
		paths, err := m.Setup(context.Background(), testPod(vol("host", corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p, Type: &typ}})))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s %q: %v", tc.path, typ, err)
			} else if paths["host"] != filepath.Clean(p) {
				t.Errorf("%s %q: path %q", tc.path, typ, paths["host"])
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: err %v, want %q", tc.path, typ, err, tc.want)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "new/deeper"))
	if err != nil || !fi.IsDir() || mode(fi) != 0o755 {
		t.Errorf("DirectoryOrCreate made %v %v, want a directory 0755", fi, err)
	}
	fi, err = os.Stat(filepath.Join(dir, "newfile"))
	if err != nil || !fi.Mode().IsRegular() {
		t.Errorf("FileOrCreate made %v %v, want a file", fi, err)
	}
}

func TestConfigMapVolume(t *testing.T) {
	src := newFakeSources()
	src.addConfigMap("cfg", map[string]string{"app.conf": "port=80", "log.conf": "level=info"})
	src.configMaps["default/cfg"].BinaryData = map[string][]byte{"logo.bin": {0, 1, 2}}
	m, _ := newManager(t, src)
	cmVol := func(name string, items []corev1.KeyToPath, defMode *int32, optional *bool) corev1.VolumeSource {
		return corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name},
			Items: items, DefaultMode: defMode, Optional: optional}}
	}
	pod := testPod(
		vol("all", cmVol("cfg", nil, nil, nil)),
		vol("items", cmVol("cfg", []corev1.KeyToPath{{Key: "app.conf", Path: "etc/app/app.conf", Mode: ptr[int32](0o600)}, {Key: "log.conf", Path: "log.conf"}}, ptr[int32](0o640), nil)),
		vol("optional", cmVol("gone", nil, nil, ptr(true))),
	)
	paths, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := readVolume(t, paths["all"]), map[string]string{"app.conf": "port=80", "log.conf": "level=info", "logo.bin": "\x00\x01\x02"}; !maps.Equal(got, want) {
		t.Errorf("all keys: %q, want %q", got, want)
	}
	if got, want := readVolume(t, paths["items"]), map[string]string{"etc/app/app.conf": "port=80", "log.conf": "level=info"}; !maps.Equal(got, want) {
		t.Errorf("items: %q, want %q", got, want)
	}
	for p, want := range map[string]os.FileMode{"all/app.conf": 0o644, "items/etc/app/app.conf": 0o600, "items/log.conf": 0o640} {
		vol, rel, _ := strings.Cut(p, "/")
		fi, err := os.Stat(filepath.Join(paths[vol], rel))
		if err != nil || mode(fi) != want {
			t.Errorf("%s: mode %v %v, want %v", p, fi.Mode(), err, want)
		}
	}
	if link, err := os.Readlink(filepath.Join(paths["items"], "etc")); err != nil || link != "..data/etc" {
		t.Errorf("items/etc is %q %v, want a symlink to ..data/etc", link, err)
	}
	if got := readVolume(t, paths["optional"]); len(got) != 0 {
		t.Errorf("an optional missing configmap gives files %q", got)
	}
	if _, err := os.Readlink(filepath.Join(paths["optional"], "..data")); err != nil {
		t.Errorf("an optional missing configmap has no ..data: %v", err)
	}

	for _, tc := range []struct {
		name     string
		src      corev1.VolumeSource
		want     string
		notFound bool
	}{
		{"missing", cmVol("app-config", nil, nil, nil), `volume "v": configmap "app-config" not found`, true},
		{"missing, optional false", cmVol("app-config", nil, nil, ptr(false)), `configmap "app-config" not found`, true},
		{"missing key", cmVol("cfg", []corev1.KeyToPath{{Key: "nope", Path: "x"}}, nil, nil), `configmap "cfg" has no key "nope"`, false},
		{"escaping path", cmVol("cfg", []corev1.KeyToPath{{Key: "app.conf", Path: "../x"}}, nil, nil), `must not start with ..`, false},
		{"deep escaping path", cmVol("cfg", []corev1.KeyToPath{{Key: "app.conf", Path: "a/../../x"}}, nil, nil), `must be a clean path`, false},
		{"absolute path", cmVol("cfg", []corev1.KeyToPath{{Key: "app.conf", Path: "/etc/x"}}, nil, nil), `must be relative`, false},
		{"hidden path", cmVol("cfg", []corev1.KeyToPath{{Key: "app.conf", Path: "..data"}}, nil, nil), `must not start with ..`, false},
		{"file under file", cmVol("cfg", []corev1.KeyToPath{{Key: "app.conf", Path: "a"}, {Key: "log.conf", Path: "a/b"}}, nil, nil), `is below another file`, false},
		{"bad mode", cmVol("cfg", nil, ptr[int32](0o1777), nil), `defaultMode: mode 01777 is not between 0 and 0777`, false},
	} {
		_, err := m.Setup(context.Background(), testPod(vol("v", tc.src)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		} else if apierrors.IsNotFound(err) != tc.notFound {
			t.Errorf("%s: IsNotFound %v, want %v", tc.name, !tc.notFound, tc.notFound)
		}
	}
}

func TestSecretVolumeOnTmpfs(t *testing.T) {
	needMounts(t)
	src := newFakeSources()
	src.addSecret("tls", map[string]string{"tls.key": "PRIVATE", "tls.crt": "PUBLIC"})
	m, _ := newManager(t, src)
	pod := testPod(vol("tls", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", DefaultMode: ptr[int32](0o400),
		Items: []corev1.KeyToPath{{Key: "tls.key", Path: "key.pem"}, {Key: "tls.crt", Path: "cert.pem", Mode: ptr[int32](0o444)}}}}))
	paths, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	dir := paths["tls"]
	fstype, _, ok := mountOf(t, dir)
	if !ok || fstype != "tmpfs" {
		t.Fatalf("secret volume %s: mounted %v as %q, want tmpfs", dir, ok, fstype)
	}
	if got, want := readVolume(t, dir), map[string]string{"key.pem": "PRIVATE", "cert.pem": "PUBLIC"}; !maps.Equal(got, want) {
		t.Errorf("files %q, want %q", got, want)
	}
	// The file's bytes are on the tmpfs, not on the disk below it.
	var st, mnt unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "key.pem"), &st); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(dir, &mnt); err != nil {
		t.Fatal(err)
	}
	if st.Dev != mnt.Dev || st.Mode&0o777 != 0o400 {
		t.Errorf("key.pem: dev %d mode %o, want the tmpfs' dev %d and 0400", st.Dev, st.Mode&0o777, mnt.Dev)
	}
	if !mountHasFlag(t, dir, "nosuid") || !mountHasFlag(t, dir, "nodev") {
		t.Error("the secret tmpfs is not nosuid,nodev")
	}
	_, err = m.Setup(context.Background(), testPod(vol("db", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}})))
	if err == nil || err.Error() != `volumes: pod default/web: volume "db": secret "db" not found` {
		t.Errorf("missing secret: %v", err)
	}
}

// mountOf gives the file system type and super options of the mount on
// dir in /proc/self/mountinfo, or ok false.
func mountOf(t *testing.T, dir string) (fstype, opts string, ok bool) {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 5 || unescapeMountinfo(f[4]) != dir {
			continue
		}
		for i, s := range f {
			if s == "-" && i+3 < len(f) {
				fstype, opts, ok = f[i+1], f[i+3], true
			}
		}
	}
	return fstype, opts, ok
}

// mountHasFlag says whether the mount on dir has a per-mount option.
func mountHasFlag(t *testing.T, dir, flag string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) > 5 && unescapeMountinfo(f[4]) == dir {
			return strings.Contains(","+f[5]+",", ","+flag+",")
		}
	}
	return false
}

func TestDownwardAPIVolume(t *testing.T) {
	m, _ := newManager(t, newFakeSources())
	pod := testPod(vol("info", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
		{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
		{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
		{Path: "app", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels['app']"}},
		{Path: "meta/name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}, Mode: ptr[int32](0o600)},
		{Path: "cpu_limit", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
		{Path: "mem_request", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "requests.memory", Divisor: resource.MustParse("1Mi")}},
	}}}))
	paths, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"labels":      "app=\"web\"\ntier=\"front\"",
		"annotations": `note="say \"hi\""`,
		"app":         "web",
		"meta/name":   "web",
		"cpu_limit":   "4000", // the node's allocatable
		"mem_request": "64",
	}
	if got := readVolume(t, paths["info"]); !maps.Equal(got, want) {
		t.Errorf("files:\n%q\nwant\n%q", got, want)
	}
	// A label change reaches the file.
	pod.Labels["tier"] = "back"
	if _, err := m.Setup(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got := readVolume(t, paths["info"])["labels"]; got != "app=\"web\"\ntier=\"back\"" {
		t.Errorf("labels after an update: %q", got)
	}
	for _, tc := range []struct {
		item corev1.DownwardAPIVolumeFile
		want string
	}{
		{corev1.DownwardAPIVolumeFile{Path: "x", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}, `fieldRef "spec.nodeName" is not supported in a downwardAPI volume`},
		{corev1.DownwardAPIVolumeFile{Path: "x", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}, `apiVersion "v2" is not supported`},
		{corev1.DownwardAPIVolumeFile{Path: "x", ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}, `no container "" in the pod`},
		{corev1.DownwardAPIVolumeFile{Path: "x"}, `neither fieldRef nor resourceFieldRef is set`},
	} {
		_, err := m.Setup(context.Background(), testPod(vol("v", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{tc.item}}})))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err %v, want %q", err, tc.want)
		}
	}
}

func TestProjectedVolume(t *testing.T) {
	needMounts(t)
	src := newFakeSources()
	src.addConfigMap("kube-root-ca.crt", map[string]string{"ca.crt": "CA"})
	src.addSecret("creds", map[string]string{"password": "pw", "user": "u"})
	m, _ := newManager(t, src)
	projected := func(sources ...corev1.VolumeProjection) corev1.VolumeSource {
		return corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: sources, DefaultMode: ptr[int32](0o440)}}
	}
	// What admission gives every pod as kube-api-access-*.
	apiAccess := projected(
		corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr[int64](3607)}},
		corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
			Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		corev1.VolumeProjection{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
	)
	mixed := projected(
		corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}},
		corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Optional: ptr(true)}},
		corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
			Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "user", Mode: ptr[int32](0o444)}}}}, // replaces the secret's user
		corev1.VolumeProjection{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: ptr("x"), Path: "b", Optional: ptr(true)}},
	)
	pod := testPod(vol("kube-api-access-abcde", apiAccess), vol("mixed", mixed))
	paths, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := readVolume(t, paths["kube-api-access-abcde"]), map[string]string{"ca.crt": "CA", "namespace": "default", "token": "token-1-" + string(pod.UID) + "-"}; !maps.Equal(got, want) {
		t.Errorf("kube-api-access: %q, want %q", got, want)
	}
	if got, want := readVolume(t, paths["mixed"]), map[string]string{"password": "pw", "user": "CA"}; !maps.Equal(got, want) {
		t.Errorf("mixed: %q, want %q", got, want)
	}
	if fi, err := os.Stat(filepath.Join(paths["mixed"], "password")); err != nil || mode(fi) != 0o440 {
		t.Errorf("password mode %v %v, want 0440", fi, err)
	}
	for name, p := range paths {
		if fstype, _, _ := mountOf(t, p); fstype != "tmpfs" {
			t.Errorf("%s: on %q, want a tmpfs", name, fstype)
		}
	}
	// The token is kept while fresh, asked again once 80% of its life
	// passed; a failure to renew keeps a token still valid.
	if _, err := m.Setup(context.Background(), pod); err != nil || src.tokens != 1 {
		t.Fatalf("a second setup: %v, %d tokens issued", err, src.tokens)
	}
	other := testPod(vol("kube-api-access-xyz", apiAccess))
	other.UID = "uid-2"
	if _, err := m.Setup(context.Background(), other); err != nil || src.tokens != 2 {
		t.Fatalf("another pod: %v, %d tokens issued", err, src.tokens)
	}
	key := tokenKey{pod: pod.UID, seconds: 3607}
	m.tokens.mu.Lock()
	old := m.tokens.tokens[key]
	old.issued, old.expires = old.issued.Add(-50*time.Minute), old.expires.Add(-50*time.Minute)
	m.tokens.tokens[key] = old
	m.tokens.mu.Unlock()
	src.tokenErr = errors.New("the API is away")
	if _, err := m.Setup(context.Background(), pod); err != nil {
		t.Fatalf("renewal failed with a valid token: %v", err)
	}
	src.tokenErr = nil
	if paths, err = m.Setup(context.Background(), pod); err != nil || readVolume(t, paths["kube-api-access-abcde"])["token"] != "token-3-"+string(pod.UID)+"-" {
		t.Fatalf("renewed: %v %q", err, readVolume(t, paths["kube-api-access-abcde"]))
	}
	src.tokenErr = errors.New("the API is away")
	third := testPod(vol("kube-api-access-q", apiAccess))
	third.UID = "uid-3"
	if _, err := m.Setup(context.Background(), third); err == nil || !strings.Contains(err.Error(), "service-account token: the API is away") {
		t.Fatalf("no token at all: %v", err)
	}
	src.tokenErr = nil
	if err := m.Teardown(pod.UID); err != nil || len(m.tokens.tokens) != 1 {
		t.Errorf("teardown: %v, tokens kept %d", err, len(m.tokens.tokens))
	}
	for _, tc := range []struct {
		src  corev1.VolumeProjection
		want string
	}{
		{corev1.VolumeProjection{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: ptr("x"), Path: "b"}}, "projected sources[0]: projected clusterTrustBundle is not supported by isle"},
		{corev1.VolumeProjection{PodCertificate: &corev1.PodCertificateProjection{}}, "projected podCertificate is not supported by isle"},
		{corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}}}, `configmap "nope" not found`},
	} {
		_, err := m.Setup(context.Background(), testPod(vol("v", projected(tc.src))))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err %v, want %q", err, tc.want)
		}
	}
}

func TestUnsupportedKinds(t *testing.T) {
	m, _ := newManager(t, newFakeSources())
	for _, tc := range []struct {
		src  corev1.VolumeSource
		want string
	}{
		{corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nas", Path: "/x"}}, `volume "x": kind nfs is not supported by isle`},
		{corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{}}, `volume "x": kind iscsi is not supported by isle`},
		{corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d"}}, `volume "x": kind csi is not supported by isle`},
		{corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "busybox"}}, `volume "x": kind image is not supported by isle`},
		{corev1.VolumeSource{}, `volume "x": no volume source is set`},
	} {
		_, err := m.Setup(context.Background(), testPod(vol("x", tc.src)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err %v, want %q", err, tc.want)
		}
	}
	_, err := m.Setup(context.Background(), testPod(vol("../up", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}})))
	if err == nil || !strings.Contains(err.Error(), `volume name "../up"`) {
		t.Errorf("bad volume name: %v", err)
	}
	bad := testPod()
	bad.UID = "../../etc"
	if _, err := m.Setup(context.Background(), bad); err == nil || !strings.Contains(err.Error(), `uid "../../etc" is not valid`) {
		t.Errorf("bad uid: %v", err)
	}
}

func TestPersistentVolumeClaim(t *testing.T) {
	storage := t.TempDir()
	src := newFakeSources()
	hostPathType := corev1.HostPathDirectoryOrCreate
	affinity := func(host string) *corev1.VolumeNodeAffinity {
		return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{host}}},
		}}}}
	}
	addClaim := func(claim, pv string, phase corev1.PersistentVolumeClaimPhase, spec corev1.PersistentVolumeSpec) {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: claim, UID: types.UID("claim-" + claim)},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
		src.claims["default/"+claim] = c
		if pv != "" && spec.ClaimRef == nil {
			spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: claim, UID: c.UID}
		}
		src.volumes[pv] = &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv}, Spec: spec}
	}
	localPath := filepath.Join(storage, "pvc-1_default_data")
	addClaim("data", "pvc-1", corev1.ClaimBound, corev1.PersistentVolumeSpec{NodeAffinity: affinity("pi1"),
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: localPath, Type: &hostPathType}}})
	addClaim("pending", "", corev1.ClaimPending, corev1.PersistentVolumeSpec{})
	addClaim("elsewhere", "pvc-2", corev1.ClaimBound, corev1.PersistentVolumeSpec{NodeAffinity: affinity("pi2"),
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(storage, "b"), Type: &hostPathType}}})
	addClaim("nas", "pvc-3", corev1.ClaimBound, corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nas", Path: "/x"}}})
	addClaim("disk", "pv-local", corev1.ClaimBound, corev1.PersistentVolumeSpec{NodeAffinity: affinity("pi1"),
		PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: storage}}})
	addClaim("unplugged", "pv-local2", corev1.ClaimBound, corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: filepath.Join(storage, "usb")}}})
	addClaim("stolen", "pvc-4", corev1.ClaimBound, corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: "other", Name: "stolen"},
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: storage}}})
	addClaim("lost", "pvc-gone", corev1.ClaimBound, corev1.PersistentVolumeSpec{})
	delete(src.volumes, "pvc-gone")
	m, _ := newManager(t, src)
	claim := func(name string) corev1.VolumeSource {
		return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}
	}
	paths, err := m.Setup(context.Background(), testPod(vol("data", claim("data")), vol("disk", claim("disk"))))
	if err != nil {
		t.Fatal(err)
	}
	if paths["data"] != localPath || paths["disk"] != storage {
		t.Errorf("paths %q", paths)
	}
	if fi, err := os.Stat(localPath); err != nil || !fi.IsDir() || mode(fi) != 0o777 {
		t.Errorf("local-path directory %v %v, want 0777", fi, err)
	}
	for _, tc := range []struct{ claim, want string }{
		{"missing", `volume "v": persistentvolumeclaim "missing" not found`},
		{"pending", `persistentvolumeclaim "pending" is not bound (phase "Pending")`},
		{"elsewhere", `persistentvolume "pvc-2": its node affinity does not allow node "pi1"`},
		{"nas", `persistentvolume "pvc-3": kind nfs is not supported by isle`},
		{"unplugged", `local path: stat ` + filepath.Join(storage, "usb") + `: no such file or directory`},
		{"stolen", `persistentvolume "pvc-4": it is not bound to this claim`},
		{"lost", `persistentvolumeclaim "lost": persistentvolume "pvc-gone" not found`},
	} {
		_, err := m.Setup(context.Background(), testPod(vol("v", claim(tc.claim))))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.claim, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(storage, "b")); err == nil {
		t.Error("the directory of another node's volume was made")
	}

	// A generic ephemeral volume uses the claim <pod>-<volume>, if the pod owns it.
	addClaim("web-cache", "pvc-5", corev1.ClaimBound, corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(storage, "cache"), Type: &hostPathType}}})
	pod := testPod(vol("cache", corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}))
	if _, err := m.Setup(context.Background(), pod); err == nil || !strings.Contains(err.Error(), `persistentvolumeclaim "web-cache" was not created for this pod`) {
		t.Errorf("ephemeral claim of another owner: %v", err)
	}
	src.claims["default/web-cache"].OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: pod.UID, Controller: ptr(true)}}
	paths, err = m.Setup(context.Background(), pod)
	if err != nil || paths["cache"] != filepath.Join(storage, "cache") {
		t.Errorf("ephemeral: %q %v", paths, err)
	}
}

// With an fsGroup, the pod's group owns the files of a Secret volume and
// may read them, as the kubelet sets them (defaultMode 0400 becomes 0440);
// a second Setup finds them as they should be and writes nothing.
func TestSecretVolumeFSGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("this test gives files to another group: run it as root")
		}
		t.Skip("needs root to change a file's group")
	}
	src := newFakeSources()
	src.addSecret("creds", map[string]string{"password": "hunter2"})
	m, _ := newManager(t, src)
	pod := testPod(vol("creds", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds", DefaultMode: ptr[int32](0o400)}}))
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr[int64](1001)}
	paths, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(paths["creds"], "password"))
	if err != nil {
		t.Fatal(err)
	}
	if gid, _ := fileGroup(fi); mode(fi) != 0o440 || gid != 1001 {
		t.Errorf("mode %v, group %d; want 0440 and 1001", fi.Mode(), gid)
	}
	before, _ := os.Readlink(filepath.Join(paths["creds"], dataLink))
	if _, err := m.Setup(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Readlink(filepath.Join(paths["creds"], dataLink)); after != before {
		t.Errorf("a second Setup wrote the files again: %s, then %s", before, after)
	}
}
