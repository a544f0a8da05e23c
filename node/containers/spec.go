package containers

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/oci"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Spec is one container as the pod manager wants it.
type Spec struct {
	// ID is the containerd container ID (unique; NewID makes one).
	ID string
	// Image is the reference EnsureImage returned (Image.Ref).
	Image string
	// Labels are kept with the container (ListContainers returns them).
	Labels map[string]string
	// Command replaces the image's entrypoint, Args its cmd, as
	// Kubernetes defines: Command without Args drops the image's cmd.
	Command, Args []string
	Env           []string // KEY=VALUE, over the image's
	WorkingDir    string
	Mounts        []Mount
	// NetNS is the path of the pod's network namespace; "" shares the
	// board's (hostNetwork).
	NetNS    string
	Hostname string

	RunAsUser, RunAsGroup *int64
	SupplementalGroups    []int64
	ReadOnlyRootFS        bool
	Privileged            bool
	// AddCaps and DropCaps are capability names as Kubernetes writes
	// them ("NET_ADMIN", "ALL").
	AddCaps, DropCaps []string
	AllowPrivilegeEsc *bool
	// Sysctls are set in the container's namespaces (dotted names).
	Sysctls map[string]string

	TTY, Stdin, StdinOnce bool

	// CPUShares (cgroup v1 shares; 0 = default), CPUQuota/CPUPeriod in µs
	// (0 = no limit), MemoryLimit in bytes (0 = none).
	CPUShares   uint64
	CPUQuota    int64
	CPUPeriod   uint64
	MemoryLimit int64
	// CgroupParent is the pod's cgroup ("/isle/pod<uid>"); the container's
	// is CgroupParent/ID.
	CgroupParent string
	// LogPath is where the container's output is written.
	LogPath string
	// Group puts the containers of one pod into one containerd shim.
	Group string
}

// Mount is a bind mount into a container.
type Mount struct {
	Source, Destination string
	ReadOnly            bool
	// Propagation is "", "rslave" or "rshared".
	Propagation string
}

// shimGroupAnnotation makes runc's v2 shim serve all containers with the
// same value from one process (one shim per pod, not per container).
const shimGroupAnnotation = "io.containerd.runc.v2.group"

func (s *Spec) validate() error {
	switch {
	case s.ID == "":
		return fmt.Errorf("containers: spec without an ID")
	case s.Image == "":
		return fmt.Errorf("containers: container %s: no image", s.ID)
	case s.MemoryLimit < 0:
		return fmt.Errorf("containers: container %s: negative memory limit", s.ID)
	}
	for _, m := range s.Mounts {
		if !strings.HasPrefix(m.Destination, "/") {
			return fmt.Errorf("containers: container %s: mount destination %q is not absolute", s.ID, m.Destination)
		}
		switch m.Propagation {
		case "", "rslave", "rshared", "rprivate":
		default:
			return fmt.Errorf("containers: container %s: mount %s: propagation %q", s.ID, m.Destination, m.Propagation)
		}
	}
	return nil
}

// specOpts turns s into containerd's OCI spec options over img's config.
func (s *Spec) specOpts(img containerd.Image, imgCfg imageConfig) []oci.SpecOpts {
	opts := []oci.SpecOpts{oci.WithDefaultSpec(), oci.WithDefaultUnixDevices, oci.WithImageConfig(img)}
	if args := processArgs(imgCfg, s.Command, s.Args); len(args) > 0 {
		opts = append(opts, oci.WithProcessArgs(args...))
	}
	if len(s.Env) > 0 {
		opts = append(opts, oci.WithEnv(s.Env))
	}
	if s.WorkingDir != "" {
		opts = append(opts, oci.WithProcessCwd(s.WorkingDir))
	}
	if s.Hostname != "" {
		opts = append(opts, oci.WithHostname(s.Hostname))
	}
	if s.NetNS != "" {
		opts = append(opts, oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: s.NetNS}))
	} else {
		opts = append(opts, oci.WithHostNamespace(specs.NetworkNamespace), oci.WithHostHostsFile, oci.WithHostResolvconf)
	}
	if len(s.Mounts) > 0 {
		mounts := make([]specs.Mount, 0, len(s.Mounts))
		for _, m := range s.Mounts {
			o := []string{"rbind", "rw"}
			if m.ReadOnly {
				o[1] = "ro"
			}
			if m.Propagation != "" {
				o = append(o, m.Propagation)
			}
			mounts = append(mounts, specs.Mount{Type: "bind", Source: m.Source, Destination: m.Destination, Options: o})
		}
		opts = append(opts, oci.WithMounts(mounts))
	}
	switch {
	case s.RunAsUser != nil && s.RunAsGroup != nil:
		opts = append(opts, oci.WithUIDGID(uint32(*s.RunAsUser), uint32(*s.RunAsGroup)))
	case s.RunAsUser != nil:
		opts = append(opts, oci.WithUserID(uint32(*s.RunAsUser)))
	case s.RunAsGroup != nil:
		opts = append(opts, withGID(uint32(*s.RunAsGroup)))
	}
	if len(s.SupplementalGroups) > 0 {
		gs := make([]string, len(s.SupplementalGroups))
		for i, g := range s.SupplementalGroups {
			gs[i] = strconv.FormatInt(g, 10)
		}
		opts = append(opts, oci.WithAppendAdditionalGroups(gs...))
	}
	if s.ReadOnlyRootFS {
		opts = append(opts, oci.WithRootFSReadonly())
	}
	if s.Privileged {
		opts = append(opts, oci.WithPrivileged, oci.WithAllDevicesAllowed, oci.WithHostDevices)
	} else {
		if drop := capNames(s.DropCaps); len(drop) > 0 {
			if containsAll(s.DropCaps) {
				opts = append(opts, oci.WithCapabilities(nil))
			} else {
				opts = append(opts, oci.WithDroppedCapabilities(drop))
			}
		}
		if add := capNames(s.AddCaps); len(add) > 0 {
			if containsAll(s.AddCaps) {
				opts = append(opts, oci.WithAllKnownCapabilities)
			} else {
				opts = append(opts, oci.WithAddedCapabilities(add))
			}
		}
		if s.AllowPrivilegeEsc != nil && !*s.AllowPrivilegeEsc {
			opts = append(opts, oci.WithNoNewPrivileges)
		}
	}
	if len(s.Sysctls) > 0 {
		opts = append(opts, withSysctls(s.Sysctls))
	}
	if s.TTY {
		opts = append(opts, oci.WithTTY)
	}
	if s.CPUShares > 0 {
		opts = append(opts, oci.WithCPUShares(s.CPUShares))
	}
	if s.CPUQuota > 0 {
		period := s.CPUPeriod
		if period == 0 {
			period = 100000
		}
		opts = append(opts, oci.WithCPUCFS(s.CPUQuota, period))
	}
	if s.MemoryLimit > 0 {
		opts = append(opts, oci.WithMemoryLimit(uint64(s.MemoryLimit)))
	}
	if s.CgroupParent != "" {
		opts = append(opts, oci.WithCgroup(s.CgroupParent+"/"+s.ID))
	}
	if s.Group != "" {
		opts = append(opts, oci.WithAnnotations(map[string]string{shimGroupAnnotation: s.Group}))
	}
	return opts
}

// processArgs applies Kubernetes' rule for command and args over the
// image's entrypoint and cmd.
func processArgs(img imageConfig, command, args []string) []string {
	switch {
	case len(command) > 0:
		return append(append([]string{}, command...), args...)
	case len(args) > 0:
		return append(append([]string{}, img.Entrypoint...), args...)
	default:
		return append(append([]string{}, img.Entrypoint...), img.Cmd...)
	}
}

func capNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		n = strings.ToUpper(n)
		if n == "ALL" {
			continue
		}
		if !strings.HasPrefix(n, "CAP_") {
			n = "CAP_" + n
		}
		out = append(out, n)
	}
	if len(out) == 0 && containsAll(names) {
		return []string{"ALL"}
	}
	return out
}

func containsAll(names []string) bool {
	for _, n := range names {
		if strings.EqualFold(n, "ALL") {
			return true
		}
	}
	return false
}

// withGID sets the process's group, keeping its user.
func withGID(gid uint32) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Process == nil {
			s.Process = &specs.Process{}
		}
		s.Process.User.GID = gid
		return nil
	}
}

// imageConfig is what of an image's config the runtime uses.
type imageConfig = ocispec.ImageConfig

// withSysctls sets sysctls in the container's namespaces, which the
// runtime refuses for a namespace the container shares with the board.
func withSysctls(sysctls map[string]string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Linux == nil {
			s.Linux = &specs.Linux{}
		}
		if s.Linux.Sysctl == nil {
			s.Linux.Sysctl = map[string]string{}
		}
		maps.Copy(s.Linux.Sysctl, sysctls)
		return nil
	}
}
