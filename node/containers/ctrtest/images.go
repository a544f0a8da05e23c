package ctrtest

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of an image layer: a regular file (Data, Mode) or,
// with Link set, a symbolic link.
type File struct {
	Data []byte
	Mode int64
	Link string
}

// Image describes a one-layer test image.
type Image struct {
	Files      map[string]File
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkingDir string
	StopSignal string
}

// Auth, when set, is the user and password Push uses.
type Auth struct{ Username, Password string }

// Push builds img as a one-layer OCI image for this machine's platform
// and pushes it to the registry at host as repoTag ("isle/busybox:1");
// it returns the image reference to pull.
func Push(t testing.TB, host, repoTag string, img Image, auth *Auth) string {
	t.Helper()
	ref, err := name.ParseReference(host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	opts := []remote.Option{}
	if auth != nil {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: auth.Username, Password: auth.Password}))
	}
	im, err := BuildImage(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, im, opts...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref.String()
}

// Archive builds img as Push does and returns it as a `docker save`
// archive naming it ref ("example.org/isle/busybox:1").
func Archive(t testing.TB, ref string, img Image) []byte {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	im, err := BuildImage(img)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tarball.Write(tag, im, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// BuildImage builds img as a one-layer OCI image for this machine's
// platform.
func BuildImage(img Image) (v1.Image, error) {
	layerTar, err := tarOf(img.Files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	im, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	im = mutate.ConfigMediaType(im, types.OCIConfigJSON)
	cf, err := im.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Entrypoint: img.Entrypoint, Cmd: img.Cmd, Env: img.Env, User: img.User,
		WorkingDir: img.WorkingDir, StopSignal: img.StopSignal}
	if cf.Config.Env == nil {
		cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	return mutate.ConfigFile(im, cf)
}

func tarOf(files map[string]File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	dirs := map[string]bool{}
	for _, n := range names {
		for d := filepath.Dir(n); d != "/" && d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	dirNames := make([]string, 0, len(dirs))
	for d := range dirs {
		dirNames = append(dirNames, d)
	}
	sort.Strings(dirNames)
	for _, d := range dirNames {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: 0o755}); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		f := files[n]
		h := &tar.Header{Name: n[1:], Mode: f.Mode}
		if f.Link != "" {
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.Link, 0o777
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
			if h.Mode == 0 {
				h.Mode = 0o755
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if f.Link == "" {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// busyboxApplets are the commands the tests' busybox image links.
var busyboxApplets = []string{"sh", "sleep", "echo", "cat", "ls", "id", "touch", "head", "tail", "tr",
	"wc", "true", "false", "httpd", "nc", "env", "hostname", "mkdir", "rm", "kill", "date", "grep", "dd", "yes", "seq", "wget", "test", "sed", "timeout"}

// Busybox is an image of the machine's static busybox (Debian's
// busybox-static) with sh, sleep, httpd and friends linked, plus /tmp.
func Busybox(t testing.TB) Image {
	t.Helper()
	img, err := BusyboxImage()
	if err != nil {
		failOrSkip(t, err.Error())
	}
	return img
}

// BusyboxImage is Busybox for callers that are not tests.
func BusyboxImage() (Image, error) {
	bin, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return Image{}, errors.New("needs /bin/busybox (Debian's busybox-static; `make setup`)")
	}
	out, err := exec.Command("file", "-L", "/bin/busybox").Output()
	if err == nil && !bytes.Contains(out, []byte("statically linked")) {
		return Image{}, errors.New("/bin/busybox is not statically linked: install busybox-static")
	}
	files := map[string]File{"/bin/busybox": {Data: bin, Mode: 0o755}, "/tmp/.keep": {Mode: 0o644}}
	for _, a := range busyboxApplets {
		files["/bin/"+a] = File{Link: "busybox"}
	}
	return Image{Files: files, Cmd: []string{"sh"}}, nil
}

// GoBinary builds a Go package (a path in this module) as a static
// binary for this machine and returns its bytes.
func GoBinary(t testing.TB, pkg string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bin")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func failOrSkip(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
