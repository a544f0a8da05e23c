// Package volumes prepares a pod's volumes on the board's disk and gives
// its containers' bind mounts and environment: the kubelet's volume
// manager for isle's node agent, which runs pods on containerd.
//
// The agent's pod worker calls, for each pod, serialized per pod:
//
//	paths, err := m.Setup(ctx, pod)        // every sync; idempotent
//	env, err := m.Env(ctx, pod, c)          // before each container start
//	mounts, err := m.Mounts(pod, c, paths, env)
//	...                                     // containerd bind-mounts them
//	err = m.Teardown(pod.UID)               // once the pod's containers are gone
//
// and, at start, Teardown for each of PodsOnDisk that is no longer bound to
// the board. Errors of Setup name the volume and the reason and are meant
// for the pod's events; the caller retries on its next sync.
//
// # Disk layout
//
//	<PodsDir>/<uid>/volumes/empty-dir/<name>       emptyDir: a directory, or a tmpfs (medium Memory)
//	<PodsDir>/<uid>/volumes/configmap/<name>       configMap
//	<PodsDir>/<uid>/volumes/secret/<name>          secret: a tmpfs, so secrets never reach the SD card
//	<PodsDir>/<uid>/volumes/downward-api/<name>    downwardAPI
//	<PodsDir>/<uid>/volumes/projected/<name>       projected: a tmpfs (it may hold secrets)
//	<PodsDir>/<uid>/volume-subpaths/<volume>/<container>/<index>   bind mounts of subPaths
//
// hostPath volumes and the local-path PersistentVolumes of claims are
// bound from where they are on the host.
//
// # Atomic updates
//
// ConfigMap, Secret, downwardAPI and projected volumes are written as the
// kubelet writes them: the files in a timestamped directory, a ..data
// symlink to it, and each top-level name a symlink through ..data. An
// update writes a new directory and replaces ..data with rename(2), so a
// reader that resolves ..data once sees the old files or the new ones,
// never a mix. Contents are rewritten only when they differ. Like the
// kubelet's, a subPath mount of such a volume does not see updates.
//
// # SubPaths
//
// A subPath is resolved by the kernel beneath its volume (openat2 with
// RESOLVE_BENEATH, Linux 5.6 or later), so that neither .. nor a symlink,
// which a container may plant in a writable volume, leads out of it; the
// file descriptor it resolved to is bind-mounted under volume-subpaths,
// so that the path cannot be swapped between the check and the mount.
//
// # Teardown
//
// Teardown reads /proc/self/mountinfo rather than memory: it detaches
// every mount under the pod's directory (tmpfs volumes, subPath binds),
// checks that none is left, and only then removes the directory, so data
// reached through a bind is never deleted.
//
// A projected serviceAccountToken file holds a token of the pod's service
// account bound to the pod, asked of the API (Sources.Token) and asked
// again once 80% of its life has passed (token.go).
//
// Not supported: volume kinds other than those above (an error names the
// kind), clusterTrustBundle and podCertificate sources, block volumes, fsGroup
// ownership, and the Service environment variables (the caller's).
package volumes
