// Package containers runs a board's containers through containerd (the v1.7
// Go client): it pulls and imports images, creates containers from specs
// the pod manager computes, starts, stops and removes them, streams their
// stdio into log files, executes commands in them, reads their usage from
// the cgroups, and finds again after an agent restart what containerd still
// runs. It knows nothing of Pods: the pod manager (node/pods) maps Pods onto
// it. All of isle's containers live in one containerd namespace of its own.
package containers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/namespaces"
	ctrdlog "github.com/containerd/log"
)

// Config configures a Runtime.
type Config struct {
	// Address is containerd's socket; default /run/containerd/containerd.sock.
	Address string
	// Namespace is the containerd namespace of isle's containers; default "isle".
	Namespace string
	// Snapshotter unpacks images; default overlayfs.
	Snapshotter string
	// FIFODir holds the containers' stdio FIFOs; it should be on a tmpfs
	// (nothing in it outlives a reboot); default /run/isle/fifo.
	FIFODir string
	// OpenLog opens the log a container's stdout and stderr are written
	// to (node/logs); nil: output is discarded.
	OpenLog func(path string) (LogFile, error)
	// InsecureRegistries are registry hosts (host:port) spoken to in plain
	// HTTP besides those on loopback.
	InsecureRegistries []string
	// Mirrors send the pulls of images of a registry host (the key, as in
	// the image's name) to another endpoint ("http://10.77.0.1:5000" or
	// "https://host[:port]").
	Mirrors map[string]string
	// RuncRoot is runc's state directory (on a tmpfs); "": runc's
	// default, /run/containerd/runc.
	RuncRoot string
	Logger   *slog.Logger
}

// LogFile is where a container's output goes.
type LogFile interface {
	// Stream is the writer of "stdout" or "stderr".
	Stream(name string) io.Writer
	Close() error
}

func (c *Config) validate() error {
	if c.Address == "" {
		c.Address = "/run/containerd/containerd.sock"
	}
	if c.Namespace == "" {
		c.Namespace = "isle"
	}
	if c.Snapshotter == "" {
		c.Snapshotter = "overlayfs"
	}
	if c.FIFODir == "" {
		c.FIFODir = "/run/isle/fifo"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if !filepath.IsAbs(c.FIFODir) {
		return fmt.Errorf("containers: FIFODir %q is not an absolute path", c.FIFODir)
	}
	if c.RuncRoot != "" && !filepath.IsAbs(c.RuncRoot) {
		return fmt.Errorf("containers: RuncRoot %q is not an absolute path", c.RuncRoot)
	}
	for host, m := range c.Mirrors {
		if err := CheckMirror(host, m); err != nil {
			return err
		}
	}
	return nil
}

// Runtime is a connection to containerd.
type Runtime struct {
	cfg     Config
	client  *containerd.Client
	log     *slog.Logger
	version string

	reapMu sync.Mutex // one reap at a time
	mu     sync.Mutex
	live   map[string]*stdio // containers whose output is being copied, by ID
	oom    map[string]bool   // containers containerd reported an OOM kill for
	// exits receives the IDs of containers that stopped.
	exits chan string
}

// ErrUnavailable is returned when containerd does not answer.
var ErrUnavailable = errors.New("containerd is not answering")

// Connect dials containerd and checks that it answers.
func Connect(ctx context.Context, cfg Config) (*Runtime, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(cfg.Address); err != nil {
		return nil, fmt.Errorf("containers: %w at %s (%v): start containerd, or pass its socket with --containerd", ErrUnavailable, cfg.Address, err)
	}
	// The client logs every registry round trip at info level.
	_ = ctrdlog.SetLevel("warn")
	client, err := containerd.New(cfg.Address, containerd.WithDefaultNamespace(cfg.Namespace),
		containerd.WithTimeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("containers: %w at %s: %v", ErrUnavailable, cfg.Address, err)
	}
	r := &Runtime{cfg: cfg, client: client, log: cfg.Logger, live: map[string]*stdio{}, oom: map[string]bool{},
		exits: make(chan string, 64)}
	vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := client.Version(r.ns(vctx))
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("containers: %w at %s: %v", ErrUnavailable, cfg.Address, err)
	}
	r.version = v.Version
	if err := os.MkdirAll(cfg.FIFODir, 0o700); err != nil {
		client.Close()
		return nil, fmt.Errorf("containers: FIFO directory: %w", err)
	}
	return r, nil
}

// Version is containerd's version ("1.6.20").
func (r *Runtime) Version() string { return r.version }

// Serving reports whether containerd answers its health check within
// timeout (a containerd that died, or hangs, does not). Unlike the
// client's IsServing, it does not wait for a lost connection to come back:
// a containerd that died is seen as soon as its socket refuses.
func (r *Runtime) Serving(ctx context.Context, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := r.client.HealthService().Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	return err == nil && resp.Status == grpc_health_v1.HealthCheckResponse_SERVING
}

// Close closes the connection; running containers keep running.
func (r *Runtime) Close() error {
	r.mu.Lock()
	for _, s := range r.live {
		s.detach()
	}
	r.mu.Unlock()
	return r.client.Close()
}

func (r *Runtime) ns(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, r.cfg.Namespace)
}

// CheckMirror checks a registry mirror: the registry host it stands for
// (host or host:port, as in images' names) and its endpoint URL.
func CheckMirror(host, endpoint string) error {
	if host == "" || strings.ContainsAny(host, "/ ") {
		return fmt.Errorf("containers: mirror %q: want a registry host such as registry.lan or registry.lan:5000", host)
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("containers: mirror of %s: endpoint %q: want http://HOST[:PORT] or https://HOST[:PORT]", host, endpoint)
	}
	return nil
}

// runcOptions moves runc's state to RuncRoot, if set.
func (r *Runtime) runcOptions() any {
	if r.cfg.RuncRoot == "" {
		return nil
	}
	return &runcoptions.Options{Root: r.cfg.RuncRoot}
}
