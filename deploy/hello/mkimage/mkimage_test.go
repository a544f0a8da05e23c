package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/isle-cluster/isle/node/containers"
	"github.com/isle-cluster/isle/node/containers/ctrtest"
)

// testPlatforms are two platforms quick to build: the machine's and the
// oldest Pi's.
const testPlatforms = "linux/amd64,linux/arm/v6"

// wantPlatforms is what the index of testPlatforms holds, in order, with
// each binary's ELF machine and class.
var wantPlatforms = []struct {
	platform v1.Platform
	machine  elf.Machine
	class    elf.Class
}{
	{v1.Platform{OS: "linux", Architecture: "amd64"}, elf.EM_X86_64, elf.ELFCLASS64},
	{v1.Platform{OS: "linux", Architecture: "arm", Variant: "v6"}, elf.EM_ARM, elf.ELFCLASS32},
}

func TestParseArgs(t *testing.T) {
	allowed := "allowed: linux/amd64, linux/arm64, linux/arm/v7, linux/arm/v6"
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr []string // substrings of the error; none: no error
	}{
		{"push", []string{"-platforms", "linux/arm/v7, linux/amd64", "-push", "127.0.0.1:5000/isle/hello:1.0"}, nil},
		{"layout", []string{"-o", "/tmp/x"}, nil},
		{"unknown platform", []string{"-platforms", "linux/amd64,linux/riscv64", "-o", "/tmp/x"}, []string{`"linux/riscv64"`, allowed}},
		{"platform without os", []string{"-platforms", "arm64", "-o", "/tmp/x"}, []string{`"arm64"`, allowed}},
		{"empty platform entry", []string{"-platforms", "linux/amd64,", "-o", "/tmp/x"}, []string{`""`, allowed}},
		{"platform twice", []string{"-platforms", "linux/arm64,linux/arm64", "-o", "/tmp/x"}, []string{`"linux/arm64" is listed twice`}},
		{"no output", []string{"-platforms", "linux/amd64"}, []string{"give -push REF or -o DIR"}},
		{"both outputs", []string{"-push", "127.0.0.1:5000/isle/hello:1.0", "-o", "/tmp/x"}, []string{"not both"}},
		{"ref without registry", []string{"-push", "isle/hello:1.0"}, []string{`-push "isle/hello:1.0"`, "registry", "HOST:PORT/REPO:TAG"}},
		{"ref without tag", []string{"-push", "127.0.0.1:5000/isle/hello"}, []string{`-push "127.0.0.1:5000/isle/hello"`, "HOST:PORT/REPO:TAG"}},
		{"ref upper case", []string{"-push", "127.0.0.1:5000/Isle/hello:1"}, []string{`-push "127.0.0.1:5000/Isle/hello:1"`}},
		{"ref with digest", []string{"-push", "127.0.0.1:5000/isle/hello@sha256:" + strings.Repeat("a", 64)}, []string{"HOST:PORT/REPO:TAG"}},
		{"bad layout name", []string{"-o", "/tmp/x", "-name", "hello"}, []string{`-name "hello"`}},
		{"argument", []string{"-o", "/tmp/x", "extra"}, []string{`unexpected argument "extra"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseArgs(tc.args, io.Discard)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("parseArgs: %v", err)
				}
				if o.pkg != appPackage || len(o.platforms) == 0 {
					t.Errorf("options = %+v", o)
				}
				return
			}
			if err == nil {
				t.Fatalf("parseArgs: no error, want one with %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestParsePlatformsKeepsOrder(t *testing.T) {
	ps, err := parsePlatforms("linux/arm/v6,linux/amd64,linux/arm/v7")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		got = append(got, p.name+"="+p.goarch+p.goarm)
	}
	if want := []string{"linux/arm/v6=arm6", "linux/amd64=amd64", "linux/arm/v7=arm7"}; !slices.Equal(got, want) {
		t.Errorf("platforms = %v, want %v", got, want)
	}
}

// TestPush pushes the image twice to a registry on loopback and reads it
// back: the same index both times, with the right images.
func TestPush(t *testing.T) {
	needGo(t)
	host := ctrtest.Registry(t, "")
	start := time.Now()
	ref := host + "/isle/hello:1.0"
	digest := mkimage(t, "-platforms", testPlatforms, "-push", ref)

	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(tag, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("read %s back: %v", ref, err)
	}
	if got, err := idx.Digest(); err != nil || got.String() != digest {
		t.Errorf("registry's index digest = %v (%v), mkimage printed %s", got, err, digest)
	}
	checkIndex(t, idx)

	again := mkimage(t, "-platforms", testPlatforms, "-push", host+"/isle/hello:again")
	if again != digest {
		t.Errorf("second build: index digest %s, first %s: not reproducible", again, digest)
	}
	t.Logf("two builds and pushes in %v", time.Since(start).Round(time.Millisecond))
}

// TestLayout writes the image as an OCI image layout and reads it back.
func TestLayout(t *testing.T) {
	needGo(t)
	dir := filepath.Join(t.TempDir(), "hello")
	digest := mkimage(t, "-platforms", testPlatforms, "-o", dir, "-name", "example.org:5000/isle/hello:2")

	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var top v1.IndexManifest
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(top.Manifests) != 1 {
		t.Fatalf("index.json lists %d descriptors, want the image index only:\n%s", len(top.Manifests), b)
	}
	d := top.Manifests[0]
	if d.MediaType != types.OCIImageIndex || d.Digest.String() != digest {
		t.Errorf("index.json descriptor = %s %s, want %s %s", d.MediaType, d.Digest, types.OCIImageIndex, digest)
	}
	wantAnn := map[string]string{"io.containerd.image.name": "example.org:5000/isle/hello:2", "org.opencontainers.image.ref.name": "2"}
	for k, v := range wantAnn {
		if d.Annotations[k] != v {
			t.Errorf("index.json annotation %s = %q, want %q", k, d.Annotations[k], v)
		}
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	inner, err := idx.ImageIndex(d.Digest)
	if err != nil {
		t.Fatalf("layout's image index: %v", err)
	}
	checkIndex(t, inner)

	t.Run("isle images import", func(t *testing.T) { checkImport(t, dir, "example.org:5000/isle/hello", "2", digest) })

	if err := run(t.Context(), []string{"-platforms", "linux/amd64", "-o", dir}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("-o into the written layout: err = %v, want it refused as not empty", err)
	}
}

// checkImport loads the layout at dir, as a tar, into a containerd of
// the test the way `isle images import` does, which unpacks it for this
// machine.
func checkImport(t *testing.T, dir, repo, tag, digest string) {
	sock := ctrtest.Containerd(t)
	ref := repo + ":" + tag
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	rt, err := containers.Connect(ctrtest.Context(t), containers.Config{Address: sock, Namespace: "isle-test", FIFODir: filepath.Join(t.TempDir(), "fifo")})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	names, err := rt.Import(ctrtest.Context(t), &archive)
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	if !slices.Equal(names, []string{ref}) {
		t.Errorf("import named %q, want [%s]", names, ref)
	}
	imgs, err := rt.Images(ctrtest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	wantID := repo + "@" + digest
	if len(imgs) != 1 || imgs[0].Ref != ref || imgs[0].ID != wantID {
		t.Errorf("images after import: %+v, want %s with ID %s", imgs, ref, wantID)
	}
}

// TestBuildFails builds a package that does not compile: the error says
// which build failed and shows the compiler's output.
func TestBuildFails(t *testing.T) {
	needGo(t)
	ps, err := parsePlatforms("linux/amd64,linux/arm/v6")
	if err != nil {
		t.Fatal(err)
	}
	o := options{platforms: ps, out: t.TempDir(), pkg: "github.com/isle-cluster/isle/deploy/hello/mkimage/testdata/broken"}
	err = o.make(t.Context(), io.Discard)
	if err == nil {
		t.Fatal("make: no error for a package that does not compile")
	}
	for _, want := range []string{"go build github.com/isle-cluster/isle/deploy/hello/mkimage/testdata/broken for linux/", "undefined: undefinedFunction"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// mkimage runs the command with args and returns the digest it printed.
func mkimage(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(t.Context(), args, &out, io.Discard); err != nil {
		t.Fatalf("mkimage %s: %v", strings.Join(args, " "), err)
	}
	digest := strings.TrimSpace(out.String())
	if _, err := v1.NewHash(digest); err != nil {
		t.Fatalf("mkimage %s printed %q, not a digest: %v", strings.Join(args, " "), out.String(), err)
	}
	return digest
}

// checkIndex checks an index of testPlatforms: OCI media types, the
// platforms in order, each image's config and its one layer.
func checkIndex(t *testing.T, idx v1.ImageIndex) {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", im.MediaType, types.OCIImageIndex)
	}
	if len(im.Manifests) != len(wantPlatforms) {
		t.Fatalf("index has %d manifests, want %d", len(im.Manifests), len(wantPlatforms))
	}
	for i, want := range wantPlatforms {
		desc := im.Manifests[i]
		if desc.MediaType != types.OCIManifestSchema1 {
			t.Errorf("manifest %d: media type %s", i, desc.MediaType)
		}
		if desc.Platform == nil || !desc.Platform.Equals(want.platform) {
			t.Errorf("manifest %d: platform %v, want %v", i, desc.Platform, want.platform)
			continue
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatalf("image %s: %v", want.platform, err)
		}
		checkImage(t, img, want.platform, want.machine, want.class)
	}
}

func checkImage(t *testing.T, img v1.Image, p v1.Platform, machine elf.Machine, class elf.Class) {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("%s: manifest config %s, layers %v: want OCI media types and one layer", p, m.Config.MediaType, m.Layers)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Platform(); got == nil || !got.Equals(p) {
		t.Errorf("%s: config platform %v", p, got)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/hello"}) {
		t.Errorf("%s: entrypoint %q, want [/hello]", p, cf.Config.Entrypoint)
	}
	if !slices.Contains(cf.Config.Env, "PORT=8080") {
		t.Errorf("%s: env %q lacks PORT=8080", p, cf.Config.Env)
	}
	if _, ok := cf.Config.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("%s: exposed ports %v lack 8080/tcp", p, cf.Config.ExposedPorts)
	}
	if !cf.Created.Equal(time.Unix(0, 0)) {
		t.Errorf("%s: created %v, want the fixed time", p, cf.Created)
	}

	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s: layers %v, %v", p, layers, err)
	}
	files := readLayer(t, layers[0])
	hello, ok := files["hello"]
	if !ok {
		t.Fatalf("%s: the layer has no /hello (has %v)", p, slices.Sorted(maps.Keys(files)))
	}
	if hello.hdr.Mode != 0o755 || hello.hdr.Uid != 0 || hello.hdr.Gid != 0 || hello.hdr.Typeflag != tar.TypeReg {
		t.Errorf("%s: /hello mode %o uid %d gid %d type %c, want a root-owned 0755 file", p, hello.hdr.Mode, hello.hdr.Uid, hello.hdr.Gid, hello.hdr.Typeflag)
	}
	f, err := elf.NewFile(bytes.NewReader(hello.data))
	if err != nil {
		t.Fatalf("%s: /hello is not ELF: %v", p, err)
	}
	if f.Machine != machine || f.Class != class {
		t.Errorf("%s: /hello is %s %s, want %s %s", p, f.Class, f.Machine, class, machine)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("%s: /hello has an ELF interpreter: not static", p)
		}
	}
	if tmp := files["tmp/"]; tmp.hdr == nil || tmp.hdr.Typeflag != tar.TypeDir || tmp.hdr.Mode != 0o1777 {
		t.Errorf("%s: /tmp is %+v, want a 1777 directory", p, tmp.hdr)
	}
	for file, want := range map[string]string{"etc/passwd": "nobody:x:65534:65534:", "etc/group": "nobody:x:65534:"} {
		if e := files[file]; !strings.HasPrefix(string(e.data), "root:x:0:") || !strings.Contains(string(e.data), want) {
			t.Errorf("%s: /%s = %q, want root and nobody", p, file, e.data)
		}
	}
}

type layerFile struct {
	hdr  *tar.Header
	data []byte
}

func readLayer(t *testing.T, l v1.Layer) map[string]layerFile {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]layerFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("layer: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("layer: %s: %v", h.Name, err)
		}
		files[h.Name] = layerFile{hdr: h, data: data}
	}
}

// needGo fails (in CI) or skips the test without the go command.
func needGo(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("go"); err == nil {
		return
	}
	msg := "needs the go command on PATH to cross-compile deploy/hello"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
