package containers

import (
	"fmt"
	"path/filepath"
)

// DaemonConfig is the configuration of a containerd that serves isle
// alone, with everything of it below dir except its state (on a tmpfs,
// as /run is): root dir/root, the socket, opt dir/opt. Its CRI plugin and
// the snapshotters isle does not use are off.
func DaemonConfig(dir, state, socket string) []byte {
	return fmt.Appendf(nil, `version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, filepath.Join(dir, "root"), state, socket, filepath.Join(dir, "opt"))
}

// RegistryConfig is the configuration of Debian's docker-registry
// (distribution 2.8) serving from the directory data on addr (host:port)
// in plain HTTP, with basic authentication from htpasswd (a file of bcrypt
// entries) if it is set.
func RegistryConfig(data, addr, htpasswd string) []byte {
	auth := ""
	if htpasswd != "" {
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: isle\n    path: %s\n", htpasswd)
	}
	return fmt.Appendf(nil, `version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
%s`, data, addr, auth)
}
