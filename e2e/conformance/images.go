package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/isle-cluster/isle/images/rootfs"
)

// The conformance tests' images, made here from source and Debian's
// packages, never downloaded. They go by their upstream names on the
// island's registry, which the boards use as the mirror of
// registry.k8s.io. Alpine-based upstream images get a Debian root (curl,
// dig, nc, ip, nginx and Apache included) shared as one layer; busybox is
// Debian's static busybox with every applet linked (and bash as sh).

// debianPackages are the Debian root's packages besides minbase's: what
// the tests run inside agnhost and jessie-dnsutils containers (curl, dig,
// nc, ip, iperf), the web servers of the nginx and httpd images, and the
// static busybox and shell of the busybox image.
var debianPackages = []string{"busybox-static", "bash-static", "curl", "bind9-dnsutils", "iproute2", "netcat-openbsd", "iperf",
	"procps", "ca-certificates", "nginx-light", "apache2"}

// platform is a board architecture the images are made for.
type platform struct {
	goarch  string // the suite's build: "amd64", "arm64", "arm/v7"
	debian  string // Debian's name: "amd64", "arm64", "armhf"
	oci     v1.Platform
	machine string // how `uname -m` shows it, for messages
}

var platforms = []platform{
	{"amd64", "amd64", v1.Platform{OS: "linux", Architecture: "amd64"}, "x86_64"},
	{"arm64", "arm64", v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}, "aarch64"},
	{"arm/v7", "armhf", v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}, "armv7l"},
}

func lookupPlatform(arch string) (platform, error) {
	for _, p := range platforms {
		if p.goarch == arch || p.debian == arch {
			return p, nil
		}
	}
	return platform{}, fmt.Errorf("images: architecture %q: want amd64, arm64 or arm/v7 (the upstream test images are built for ARMv7 at least)", arch)
}

// file is one entry of a layer made here.
type file struct {
	data []byte
	mode int64
	link string // a symbolic link's target
	dir  bool
}

// imageSpec is one image: its layers, bottom first, and its config.
type imageSpec struct {
	ref    string // under registry.k8s.io: "e2e-test-images/agnhost:2.53"
	layers []v1.Layer
	config v1.Config
}

// imageSet makes the images of one platform.
type imageSet struct {
	p        platform
	cacheDir string
	kubeDir  string // k8s.io/kubernetes's module directory (the images' data files)
	tools    tools
	log      *slog.Logger
}

// build returns every image of the set.
func (s *imageSet) build(ctx context.Context) ([]imageSpec, error) {
	mirror, err := rootfs.HostMirror("/")
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	if s.p.goarch != hostArch() {
		if err := rootfs.EnsureBinfmt(s.p.debian); err != nil {
			return nil, fmt.Errorf("images: %w", err)
		}
	}
	root, cached, err := rootfs.Build(ctx, rootfs.Spec{Suite: "bookworm", Arch: s.p.debian, Variant: "minbase",
		Packages: debianPackages, Mirror: mirror}, filepath.Join(s.cacheDir, "rootfs"), s.log)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	s.log.Info("images: Debian root", "path", root, "cached", cached)
	debian, etc, err := s.debianLayer(root)
	if err != nil {
		return nil, err
	}

	busybox, err := busyboxLayer(etc)
	if err != nil {
		return nil, err
	}
	agnhostBin, err := os.ReadFile(s.tools.agnhost)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	porter := filepath.Join(s.kubeDir, "test/images/agnhost/porter")
	agnhostFiles := map[string]file{"/agnhost": {data: agnhostBin, mode: 0o755}, "/agnhost-2": {link: "agnhost"}, "/uploads": {dir: true}}
	for _, f := range []string{"localhost.crt", "localhost.key"} {
		b, err := os.ReadFile(filepath.Join(porter, f))
		if err != nil {
			return nil, fmt.Errorf("images: agnhost: %w", err)
		}
		agnhostFiles["/"+f] = file{data: b, mode: 0o644}
	}
	agnhost, err := layerOf(agnhostFiles)
	if err != nil {
		return nil, err
	}
	// agnhost's users and groups, as its Dockerfile adds them to Alpine's.
	users, err := layerOf(map[string]file{
		"/etc/passwd": {data: append(slices.Clone(etc["passwd"]), "user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n"...), mode: 0o644},
		"/etc/group": {data: append(slices.Clone(etc["group"]),
			"user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n"...), mode: 0o644},
	})
	if err != nil {
		return nil, err
	}
	nnpBin, err := os.ReadFile(s.tools.nnp)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	nnp, err := layerOf(map[string]file{"/usr/local/bin/nnp": {data: nnpBin, mode: 0o4755}})
	if err != nil {
		return nil, err
	}
	httpd, err := layerOf(map[string]file{
		"/usr/local/bin/httpd-foreground": {data: []byte(httpdForeground), mode: 0o755},
		// The httpd image serves /usr/local/apache2/htdocs: specs move its
		// index.html away to fail a readiness probe.
		"/usr/local/apache2/htdocs/index.html":        {data: []byte("<html><body><h1>It works!</h1></body></html>\n"), mode: 0o644},
		"/etc/apache2/sites-enabled/000-default.conf": {data: []byte(httpdSite), mode: 0o644},
		"/var/log/apache2/access.log":                 {link: "/dev/stdout"},
		"/var/log/apache2/error.log":                  {link: "/dev/stderr"},
		"/var/log/apache2/other_vhosts_access.log":    {link: "/dev/stdout"},
	})
	if err != nil {
		return nil, err
	}
	nginx, err := layerOf(map[string]file{
		"/var/log/nginx/access.log": {link: "/dev/stdout"},
		"/var/log/nginx/error.log":  {link: "/dev/stderr"},
	})
	if err != nil {
		return nil, err
	}
	pictures := map[string]v1.Layer{}
	for _, img := range []string{"kitten", "nautilus"} {
		html := filepath.Join(s.kubeDir, "test/images", img, "html")
		jpg, err := os.ReadFile(filepath.Join(html, img+".jpg"))
		if err != nil {
			return nil, fmt.Errorf("images: %s: %w", img, err)
		}
		data, err := os.ReadFile(filepath.Join(html, "data.json"))
		if err != nil {
			return nil, fmt.Errorf("images: %s: %w", img, err)
		}
		if pictures[img], err = layerOf(map[string]file{"/" + img + ".jpg": {data: jpg, mode: 0o644}, "/data.json": {data: data, mode: 0o644}}); err != nil {
			return nil, err
		}
	}

	path := "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	agnhostCfg := v1.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{path},
		ExposedPorts: map[string]struct{}{"80/tcp": {}, "8080/tcp": {}, "8081/tcp": {}, "9376/tcp": {}, "5000/tcp": {}}}
	webserver := func(version string) v1.Config {
		return v1.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"test-webserver"}, Env: []string{path},
			Labels: map[string]string{"org.opencontainers.image.version": version}}
	}
	labelled := func(c v1.Config, version string) v1.Config {
		c.Labels = map[string]string{"org.opencontainers.image.version": version}
		return c
	}
	nginxCfg := v1.Config{Cmd: []string{"nginx", "-g", "daemon off;"}, Env: []string{path}, StopSignal: "SIGQUIT", ExposedPorts: map[string]struct{}{"80/tcp": {}}}
	httpdCfg := v1.Config{Cmd: []string{"httpd-foreground"}, Env: []string{path}, StopSignal: "SIGWINCH", ExposedPorts: map[string]struct{}{"80/tcp": {}}}
	return []imageSpec{
		{"e2e-test-images/agnhost:2.53", []v1.Layer{debian, agnhost, users}, agnhostCfg},
		{"pause:3.10", []v1.Layer{agnhost}, v1.Config{Entrypoint: []string{"/agnhost", "pause"}, Env: []string{path}}},
		{"e2e-test-images/busybox:1.36.1-1", []v1.Layer{busybox}, v1.Config{Cmd: []string{"sh"}, Env: []string{path}}},
		{"e2e-test-images/jessie-dnsutils:1.7", []v1.Layer{debian}, v1.Config{Cmd: []string{"bash"}, Env: []string{path}}},
		{"e2e-test-images/nonroot:1.4", []v1.Layer{debian}, v1.Config{Cmd: []string{"bash"}, Env: []string{path}, User: "1234"}},
		{"e2e-test-images/nonewprivs:1.3", []v1.Layer{busybox, nnp}, v1.Config{Cmd: []string{"nnp"}, Env: []string{path}}},
		{"e2e-test-images/kitten:1.7", []v1.Layer{debian, agnhost, users, pictures["kitten"]}, webserver("1.7")},
		{"e2e-test-images/nautilus:1.7", []v1.Layer{debian, agnhost, users, pictures["nautilus"]}, webserver("1.7")},
		{"e2e-test-images/nginx:1.14-4", []v1.Layer{debian, nginx}, labelled(nginxCfg, "1.14-4")},
		{"e2e-test-images/nginx:1.15-4", []v1.Layer{debian, nginx}, labelled(nginxCfg, "1.15-4")},
		{"e2e-test-images/httpd:2.4.38-4", []v1.Layer{debian, httpd}, labelled(httpdCfg, "2.4.38-4")},
		{"e2e-test-images/httpd:2.4.39-4", []v1.Layer{debian, httpd}, labelled(httpdCfg, "2.4.39-4")},
	}, nil
}

// httpdSite is the default site, at the httpd image's document root.
const httpdSite = `<Directory /usr/local/apache2/htdocs>
	Require all granted
</Directory>
<VirtualHost *:80>
	DocumentRoot /usr/local/apache2/htdocs
	ErrorLog ${APACHE_LOG_DIR}/error.log
	CustomLog ${APACHE_LOG_DIR}/access.log combined
</VirtualHost>
`

// httpdForeground starts Debian's Apache in the foreground, as the httpd
// image's httpd-foreground does.
const httpdForeground = `#!/bin/sh
set -e
. /etc/apache2/envvars
# /var/lock is a link to /run/lock, which no runtime makes.
mkdir -p /run/lock "$APACHE_RUN_DIR" "$APACHE_LOCK_DIR" "$APACHE_LOG_DIR"
rm -f "$APACHE_PID_FILE"
exec apache2 -DFOREGROUND "$@"
`

// debianLayer turns mmdebstrap's tarball into the image layer (without
// device nodes, apt's caches and lists, documentation and translations),
// kept beside it; it returns the layer and the root's /etc/passwd and
// /etc/group, and its busybox binary under "busybox".
func (s *imageSet) debianLayer(root string) (v1.Layer, map[string][]byte, error) {
	layerPath := strings.TrimSuffix(root, ".tar") + "-layer.tar"
	keep := map[string][]byte{}
	wanted := map[string]string{"etc/passwd": "passwd", "etc/group": "group", "usr/bin/busybox": "busybox", "bin/busybox": "busybox",
		"usr/bin/bash-static": "bash-static", "bin/bash-static": "bash-static"}
	in, err := os.Open(root)
	if err != nil {
		return nil, nil, fmt.Errorf("images: %w", err)
	}
	defer in.Close()
	_, statErr := os.Stat(layerPath)
	var tw *tar.Writer
	var out *os.File
	if errors.Is(statErr, fs.ErrNotExist) {
		if out, err = os.Create(layerPath + ".tmp"); err != nil {
			return nil, nil, fmt.Errorf("images: %w", err)
		}
		defer out.Close()
		tw = tar.NewWriter(out)
	}
	tr := tar.NewReader(in)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("images: %s: %w", root, err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if k, ok := wanted[name]; ok && h.Typeflag == tar.TypeReg {
			if keep[k], err = io.ReadAll(tr); err != nil {
				return nil, nil, fmt.Errorf("images: %s: %w", root, err)
			}
			if tw != nil {
				if err := writeEntry(tw, h, bytes.NewReader(keep[k])); err != nil {
					return nil, nil, err
				}
			}
			continue
		}
		if tw == nil || dropFromLayer(name, h) {
			continue
		}
		if err := writeEntry(tw, h, tr); err != nil {
			return nil, nil, err
		}
	}
	for _, k := range []string{"passwd", "group", "busybox", "bash-static"} {
		if keep[k] == nil {
			return nil, nil, fmt.Errorf("images: %s has no %s", root, k)
		}
	}
	if tw != nil {
		if err := tw.Close(); err != nil {
			return nil, nil, fmt.Errorf("images: %w", err)
		}
		if err := out.Sync(); err != nil {
			return nil, nil, fmt.Errorf("images: %w", err)
		}
		if err := os.Rename(layerPath+".tmp", layerPath); err != nil {
			return nil, nil, fmt.Errorf("images: %w", err)
		}
	}
	l, err := tarball.LayerFromFile(layerPath, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, nil, fmt.Errorf("images: %w", err)
	}
	return l, keep, nil
}

func writeEntry(tw *tar.Writer, h *tar.Header, body io.Reader) error {
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("images: layer: %w", err)
	}
	if h.Typeflag == tar.TypeReg {
		if _, err := io.Copy(tw, body); err != nil {
			return fmt.Errorf("images: layer: %w", err)
		}
	}
	return nil
}

// dropFromLayer says which entries of the Debian root stay out of the
// image: device nodes (the runtime makes /dev), apt's caches and lists,
// documentation and translations.
func dropFromLayer(name string, h *tar.Header) bool {
	if h.Typeflag == tar.TypeChar || h.Typeflag == tar.TypeBlock || h.Typeflag == tar.TypeFifo {
		return true
	}
	for _, p := range []string{"dev/", "var/cache/apt/", "var/lib/apt/lists/", "usr/share/doc/", "usr/share/man/",
		"usr/share/locale/", "usr/share/info/"} {
		if strings.HasPrefix(name, p) && name != p {
			return true
		}
	}
	return false
}

// busyboxLayer is the busybox image's one layer: the static busybox with
// every applet it has linked in /bin, a root and a nobody user, and /tmp.
// Its sh is Debian's static bash: the ash of Debian's busybox (1.35)
// drops environment variables whose names are not shell identifiers
// ("data-1", which the ConfigMap and Secret environment specs set and read
// back with `sh -c env`), where upstream's image (busybox 1.36.1) keeps
// them.
func busyboxLayer(etc map[string][]byte) (v1.Layer, error) {
	// The applets are those of the machine's own busybox-static, the same
	// Debian build as the root's.
	out, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		return nil, errors.New("images: busybox --list: needs Debian's busybox-static on this machine (make setup)")
	}
	files := map[string]file{
		"/bin/busybox": {data: etc["busybox"], mode: 0o755},
		"/etc/passwd":  {data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n"), mode: 0o644},
		"/etc/group":   {data: []byte("root:x:0:\nnogroup:x:65534:\n"), mode: 0o644},
		"/tmp":         {dir: true, mode: 0o1777},
		"/root":        {dir: true, mode: 0o700},
		"/var":         {dir: true},
		"/home":        {dir: true},
	}
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			files["/bin/"+a] = file{link: "busybox"}
		}
	}
	files["/bin/sh"] = file{data: etc["bash-static"], mode: 0o755}
	return layerOf(files)
}

// layerOf is a layer of files, in a fixed order with fixed times, so the
// same files give the same digest.
func layerOf(files map[string]file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for n, f := range files {
		if f.dir {
			dirs[n] = true
		}
		for d := filepath.Dir(n); d != "/"; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		mode := int64(0o755)
		if f, ok := files[d]; ok && f.mode != 0 {
			mode = f.mode
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: mode}); err != nil {
			return nil, fmt.Errorf("images: layer: %w", err)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(files)) {
		f := files[n]
		h := &tar.Header{Name: n[1:], Mode: f.mode}
		switch {
		case f.dir:
			continue
		case f.link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.link, 0o777
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("images: layer: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("images: layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("images: layer: %w", err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("images: layer: %w", err)
	}
	return l, nil
}

// image assembles spec for platform p.
func (spec imageSpec) image(p platform) (v1.Image, error) {
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), spec.layers...)
	if err != nil {
		return nil, fmt.Errorf("images: %s: %w", spec.ref, err)
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("images: %s: %w", spec.ref, err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.oci.OS, p.oci.Architecture, p.oci.Variant
	cf.Config = spec.config
	return mutate.ConfigFile(img, cf)
}

// push pushes every image to the registry at addr (plain HTTP) under its
// upstream name without the registry.k8s.io host.
func push(ctx context.Context, addr string, p platform, specs []imageSpec, log *slog.Logger) error {
	for _, spec := range specs {
		ref, err := name.ParseReference(addr+"/"+spec.ref, name.Insecure)
		if err != nil {
			return fmt.Errorf("images: %w", err)
		}
		img, err := spec.image(p)
		if err != nil {
			return err
		}
		if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("images: push %s: %w", ref, err)
		}
		log.Info("images: pushed", "image", "registry.k8s.io/"+spec.ref, "to", ref.String())
	}
	return nil
}

// describe prints each image's reference, platform, digest and compressed
// size, as made for p.
func describe(p platform, specs []imageSpec, w io.Writer) error {
	for _, spec := range specs {
		img, err := spec.image(p)
		if err != nil {
			return err
		}
		digest, err := img.Digest()
		if err != nil {
			return fmt.Errorf("images: %s: %w", spec.ref, err)
		}
		var size int64
		layers, err := img.Layers()
		if err != nil {
			return fmt.Errorf("images: %s: %w", spec.ref, err)
		}
		for _, l := range layers {
			n, err := l.Size()
			if err != nil {
				return fmt.Errorf("images: %s: %w", spec.ref, err)
			}
			size += n
		}
		fmt.Fprintf(w, "registry.k8s.io/%s\t%s\t%s\t%.1f MB\n", spec.ref, p.machine, digest, float64(size)/1e6)
	}
	return nil
}
