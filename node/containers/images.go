package containers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/images"
	"github.com/containerd/containerd/platforms"
	"github.com/containerd/containerd/remotes/docker"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	corev1 "k8s.io/api/core/v1"
)

// Errors of EnsureImage; their text is what `kubectl describe pod` shows,
// their names the waiting reasons Kubernetes users know.
var (
	ErrImagePull      = errors.New("ErrImagePull")
	ErrImageNeverPull = errors.New("ErrImageNeverPull")
	ErrInvalidImage   = errors.New("InvalidImageName")
)

// Credentials answers the user and secret for a registry host ("" and
// "" for anonymous access).
type Credentials func(host string) (user, secret string, err error)

// Image is a pulled image.
type Image struct {
	// Ref is the normalized reference ("docker.io/library/nginx:1.27").
	Ref string
	// ID is the reference by digest ("docker.io/library/nginx@sha256:…"),
	// the containerStatuses' imageID.
	ID string
	// Pulled: EnsureImage pulled it (it was not present, or the policy is
	// Always).
	Pulled bool
}

// NormalizeImage turns a Pod's image ("nginx", "127.0.0.1:5000/hello:1")
// into the full reference containerd stores.
func NormalizeImage(image string) (string, error) {
	named, err := reference.ParseDockerRef(image)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrInvalidImage, image, err)
	}
	return named.String(), nil
}

// EnsureImage makes image present according to policy, pulling it with
// creds when needed.
func (r *Runtime) EnsureImage(ctx context.Context, image string, policy corev1.PullPolicy, creds Credentials) (Image, error) {
	ref, err := NormalizeImage(image)
	if err != nil {
		return Image{}, err
	}
	if policy == "" {
		policy = corev1.PullIfNotPresent
		if strings.HasSuffix(ref, ":latest") {
			policy = corev1.PullAlways
		}
	}
	ctx = r.ns(ctx)
	if policy != corev1.PullAlways {
		img, err := r.client.GetImage(ctx, ref)
		if err == nil {
			if err := r.unpack(ctx, img); err != nil {
				return Image{}, err
			}
			return imageOf(img), nil
		}
		if !errdefs.IsNotFound(err) {
			return Image{}, fmt.Errorf("containers: image %s: %w", ref, err)
		}
		if policy == corev1.PullNever {
			return Image{}, fmt.Errorf("%w: container image %q is not present with pull policy of Never", ErrImageNeverPull, image)
		}
	}
	img, err := r.pull(ctx, ref, creds)
	if err != nil {
		return Image{}, err
	}
	out := imageOf(img)
	out.Pulled = true
	return out, nil
}

func (r *Runtime) pull(ctx context.Context, ref string, creds Credentials) (containerd.Image, error) {
	start := time.Now()
	authorizer := docker.NewDockerAuthorizer(docker.WithAuthCreds(func(host string) (string, string, error) {
		if creds == nil {
			return "", "", nil
		}
		return creds(host)
	}))
	resolver := docker.NewResolver(docker.ResolverOptions{Hosts: r.registryHosts(authorizer)})
	img, err := r.client.Pull(ctx, ref, containerd.WithResolver(resolver), containerd.WithPullUnpack,
		containerd.WithPullSnapshotter(r.cfg.Snapshotter), containerd.WithPlatformMatcher(platforms.Default()))
	if err != nil {
		return nil, fmt.Errorf("%w: failed to pull and unpack image %q: %v", ErrImagePull, ref, err)
	}
	r.log.Info("containers: image pulled", "image", ref, "took", time.Since(start).Round(time.Millisecond))
	return img, nil
}

// registryHosts says where the images of a registry host are pulled
// from: the host itself, or its mirror.
func (r *Runtime) registryHosts(authorizer docker.Authorizer) docker.RegistryHosts {
	direct := docker.ConfigureDefaultRegistries(docker.WithPlainHTTP(r.plainHTTP), docker.WithAuthorizer(authorizer))
	return func(host string) ([]docker.RegistryHost, error) {
		m, ok := r.cfg.Mirrors[host]
		if !ok {
			return direct(host)
		}
		u, err := url.Parse(m)
		if err != nil {
			return nil, fmt.Errorf("containers: mirror of %s: %w", host, err)
		}
		plain := u.Scheme == "http"
		hosts, err := docker.ConfigureDefaultRegistries(docker.WithAuthorizer(authorizer),
			docker.WithPlainHTTP(func(string) (bool, error) { return plain, nil }))(u.Host)
		if err != nil {
			return nil, fmt.Errorf("containers: mirror of %s: %w", host, err)
		}
		return hosts, nil
	}
}

// plainHTTP: registries on loopback and those configured insecure are
// spoken to in plain HTTP.
func (r *Runtime) plainHTTP(host string) (bool, error) {
	if ok, _ := docker.MatchLocalhost(host); ok {
		return true, nil
	}
	return slices.Contains(r.cfg.InsecureRegistries, host), nil
}

func (r *Runtime) unpack(ctx context.Context, img containerd.Image) error {
	ok, err := img.IsUnpacked(ctx, r.cfg.Snapshotter)
	if err == nil && ok {
		return nil
	}
	if err := img.Unpack(ctx, r.cfg.Snapshotter); err != nil {
		return fmt.Errorf("containers: unpack %s: %w", img.Name(), err)
	}
	return nil
}

func imageOf(img containerd.Image) Image {
	ref := img.Name()
	id := img.Target().Digest.String()
	if named, err := reference.ParseNormalizedNamed(ref); err == nil {
		id = named.Name() + "@" + id
	}
	return Image{Ref: ref, ID: id}
}

// Import loads images from an archive (`docker save` or an OCI image
// layout tar) for this board's platform, unpacks them, and returns their
// names.
func (r *Runtime) Import(ctx context.Context, archive io.Reader) ([]string, error) {
	ctx = r.ns(ctx)
	imgs, err := r.client.Import(ctx, archive, containerd.WithImportPlatform(platforms.Default()),
		containerd.WithDigestRef(func(d digest.Digest) string { return "import-" + d.String() }),
		containerd.WithSkipDigestRef(func(name string) bool { return name != "" }))
	if err != nil {
		return nil, fmt.Errorf("containers: import: %w", err)
	}
	if len(imgs) == 0 {
		return nil, errors.New("containers: import: the archive holds no image")
	}
	var names []string
	for _, m := range imgs {
		img := containerd.NewImageWithPlatform(r.client, m, platforms.Default())
		if err := r.unpack(ctx, img); err != nil {
			return names, fmt.Errorf("containers: import %s: %w (is it for this board's platform, %s?)", m.Name, err, platforms.DefaultString())
		}
		names = append(names, m.Name)
	}
	return names, nil
}

// ImageInfo describes a stored image.
type ImageInfo struct {
	Ref  string
	ID   string
	Size int64
}

// Images lists the stored images.
func (r *Runtime) Images(ctx context.Context) ([]ImageInfo, error) {
	ctx = r.ns(ctx)
	imgs, err := r.client.ListImages(ctx)
	if err != nil {
		return nil, fmt.Errorf("containers: list images: %w", err)
	}
	out := make([]ImageInfo, 0, len(imgs))
	for _, img := range imgs {
		size, _ := img.Size(ctx)
		i := imageOf(img)
		out = append(out, ImageInfo{Ref: i.Ref, ID: i.ID, Size: size})
	}
	return out, nil
}

// DiskUsage is the used fraction (0–1) of the filesystem at path (where
// containerd keeps images).
func DiskUsage(path string) (float64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("containers: statfs %s: %w", path, err)
	}
	if st.Blocks == 0 {
		return 0, nil
	}
	return 1 - float64(st.Bavail)/float64(st.Blocks), nil
}

// CollectImages removes images no container uses, least recently created
// first, while usage() (the image filesystem's used fraction) is above
// low; it does nothing unless usage() is above high. inUse holds the
// references of images in use (Image.Ref).
func (r *Runtime) CollectImages(ctx context.Context, inUse map[string]bool, usage func() (float64, error), high, low float64) ([]string, error) {
	u, err := usage()
	if err != nil || u <= high {
		return nil, err
	}
	ctx = r.ns(ctx)
	used := map[string]bool{}
	for k, v := range inUse {
		used[k] = v
	}
	ctrs, err := r.client.Containers(ctx)
	if err != nil {
		return nil, fmt.Errorf("containers: image GC: %w", err)
	}
	for _, c := range ctrs {
		if info, err := c.Info(ctx, containerd.WithoutRefreshedMetadata); err == nil {
			used[info.Image] = true
		}
	}
	imgs, err := r.client.ImageService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("containers: image GC: %w", err)
	}
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].UpdatedAt.Before(imgs[j].UpdatedAt) })
	var removed []string
	for _, img := range imgs {
		if used[img.Name] {
			continue
		}
		if err := r.client.ImageService().Delete(ctx, img.Name, images.SynchronousDelete()); err != nil && !errdefs.IsNotFound(err) {
			return removed, fmt.Errorf("containers: image GC: remove %s: %w", img.Name, err)
		}
		removed = append(removed, img.Name)
		r.log.Info("containers: image removed to free disk", "image", img.Name)
		if u, err = usage(); err != nil || u <= low {
			break
		}
	}
	return removed, err
}

// dockerConfig is the content of a kubernetes.io/dockerconfigjson Secret
// (or, under "auths"-less form, of a kubernetes.io/dockercfg one).
type dockerConfig struct {
	Auths map[string]DockerAuth `json:"auths"`
}

// DockerAuth is one registry's entry of a docker config.
type DockerAuth struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
}

// ParseDockerConfig reads the registry credentials of an image pull
// secret: data is the Secret's .dockerconfigjson (or .dockercfg) value.
func ParseDockerConfig(data []byte) (map[string]DockerAuth, error) {
	var cfg dockerConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("containers: docker config: %w", err)
	}
	if cfg.Auths == nil { // the old .dockercfg form: the map itself
		if err := json.Unmarshal(data, &cfg.Auths); err != nil {
			return nil, fmt.Errorf("containers: docker config: %w", err)
		}
	}
	out := map[string]DockerAuth{}
	for host, a := range cfg.Auths {
		if a.Auth != "" && a.Username == "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("containers: docker config: auth of %q is not base64: %w", host, err)
			}
			user, pass, ok := strings.Cut(string(raw), ":")
			if !ok {
				return nil, fmt.Errorf("containers: docker config: auth of %q is not user:password", host)
			}
			a.Username, a.Password = user, pass
		}
		out[registryHost(host)] = a
	}
	return out, nil
}

// registryHost turns a docker config key ("https://index.docker.io/v1/",
// "registry.example:5000") into the host the resolver asks for.
func registryHost(key string) string {
	h := strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	h, _, _ = strings.Cut(h, "/")
	if h == "index.docker.io" || h == "docker.io" {
		return "registry-1.docker.io"
	}
	return h
}

// CredentialsFrom answers from the pull secrets' parsed configs, the
// first that names the host winning.
func CredentialsFrom(configs ...map[string]DockerAuth) Credentials {
	return func(host string) (string, string, error) {
		for _, c := range configs {
			if a, ok := c[host]; ok {
				if a.IdentityToken != "" {
					return "", a.IdentityToken, nil
				}
				return a.Username, a.Password, nil
			}
		}
		return "", "", nil
	}
}

// ImageFS is the directory where containerd unpacks images (its
// snapshotter's root): the filesystem image garbage collection watches.
func (r *Runtime) ImageFS(ctx context.Context) (string, error) {
	resp, err := r.client.IntrospectionService().Plugins(r.ns(ctx), []string{
		`type==io.containerd.snapshotter.v1,id==` + r.cfg.Snapshotter})
	if err != nil {
		return "", fmt.Errorf("containers: image filesystem: %w", err)
	}
	for _, p := range resp.Plugins {
		if root := p.Exports["root"]; root != "" {
			return root, nil
		}
	}
	return "", fmt.Errorf("containers: image filesystem: the %s snapshotter reports no root", r.cfg.Snapshotter)
}
