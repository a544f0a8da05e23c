package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/isle-cluster/isle/control/controllers/nodelifecycle"
	"github.com/isle-cluster/isle/hw/led"
	"github.com/isle-cluster/isle/node/agent"
	"github.com/isle-cluster/isle/node/containers"
)

// nodeFlags are the node agent's flags, the same for `isle server` and
// `isle agent`: how the board runs pods.
type nodeFlags struct {
	containerd   string
	namespace    string
	runDir       string
	streamPort   int
	podResync    time.Duration
	maxPods      int
	reservedCPU  string
	reservedMem  string
	reservedDisk string
	cgroupParent string
	mirrors      []string
	insecure     []string
	clusterCIDR  string
	clusterDNS   string
	domain       string
	resolvConf   string
	ingressHTTP  string
	ingressHTTPS string
	ledReady     led.Spec
	ledActivity  led.Spec
}

func (f *nodeFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&f.containerd, "containerd", "/run/containerd/containerd.sock", "containerd's socket, through which the board runs its pods; none: the board runs no pods")
	fl.StringVar(&f.namespace, "containerd-namespace", "isle", "containerd namespace of isle's containers")
	fl.StringVar(&f.runDir, "run-dir", "/run/isle", "directory for what does not outlive a reboot (pods' network namespaces, stdio FIFOs); on a tmpfs")
	fl.IntVar(&f.streamPort, "stream-port", agent.DefaultStreamPort, "port of the board's streaming server (kubectl logs, exec, attach through the API servers)")
	fl.DurationVar(&f.podResync, "pod-resync", time.Minute, "how often every pod is synced without a cause: configMap and secret changes reach their volumes then")
	fl.IntVar(&f.maxPods, "max-pods", 110, "how many pods the board takes")
	fl.StringVar(&f.reservedCPU, "reserved-cpu", "0", "CPU kept from pods for the system and isle, such as 250m")
	fl.StringVar(&f.reservedMem, "reserved-memory", "0", "memory kept from pods for the system and isle, such as 128Mi (0: 10% of the board's memory)")
	fl.StringVar(&f.reservedDisk, "reserved-storage", "0", "space of the data directory's filesystem kept from pods' ephemeral storage, such as 1Gi")
	fl.StringVar(&f.cgroupParent, "cgroup-parent", "/isle", "cgroup that holds the pods' cgroups")
	fl.StringArrayVar(&f.mirrors, "registry-mirror", nil, "pull the images of a registry from another endpoint: HOST=http://ADDR:PORT or HOST=https://ADDR[:PORT] (HOST as in images' names); repeat for more")
	fl.StringArrayVar(&f.insecure, "insecure-registry", nil, "a registry (HOST:PORT as in images' names) spoken to in plain HTTP, such as a registry on the LAN without TLS; repeat for more")
	fl.StringVar(&f.clusterCIDR, "cluster-cidr", nodelifecycle.DefaultPodCIDR.String(), "range of Pod addresses, from which each node gets a /24 (the same on every board)")
	fl.StringVar(&f.clusterDNS, "cluster-dns", agent.DefaultClusterDNS.String(), "address of the cluster DNS Service, the nameserver of pods (the tenth of the service range)")
	fl.StringVar(&f.domain, "cluster-domain", agent.DefaultClusterDomain, "the cluster's DNS domain")
	fl.StringVar(&f.resolvConf, "resolv-conf", "/etc/resolv.conf", "the board's resolver configuration: the cluster DNS forwards other names to its nameservers; pods with dnsPolicy Default get it")
	fl.StringVar(&f.ingressHTTP, "ingress-http", ":80", "address of the ingress controller's HTTP listener; none: no ingress controller on this board")
	fl.StringVar(&f.ingressHTTPS, "ingress-https", ":443", "address of the ingress controller's HTTPS listener (certificates from the Ingresses' TLS Secrets)")
	fl.Var(&f.ledReady, "led-ready", "the readiness LED: gpioN[:active-low] (BCM numbering), sysfs:NAME (/sys/class/leds/NAME), virtual or none; default the board's own ACT LED if it has one")
	fl.Var(&f.ledActivity, "led-activity", "the activity LED, flashing at every reconcile that changed something: gpioN[:active-low], sysfs:NAME, virtual or none")
}

// openLEDs opens the board's LEDs, the readiness one showing that isle is
// starting, and keeps their state in RUN-DIR/leds.json for `isle status`.
// Close the Board when isle ends: it leaves the LEDs dark (and gives a
// sysfs LED its trigger back).
func (f *nodeFlags) openLEDs(log *slog.Logger) (*led.Board, error) {
	if err := os.MkdirAll(f.runDir, 0o755); err != nil {
		return nil, fmt.Errorf("--run-dir: %w", err)
	}
	if inRAM, err := inMemory(f.runDir); err != nil {
		log.Warn("the run directory's file system is unknown", "dir", f.runDir, "err", err)
	} else if !inRAM {
		log.Warn("the run directory is not in memory (a tmpfs): what isle keeps there (the LED state, pod network records) is written to the disk or SD card; give --run-dir a tmpfs such as /run/isle", "dir", f.runDir)
	}
	ready := f.ledReady
	if ready.Kind == led.KindUnset {
		ready = led.DefaultReadiness("")
	}
	rl, err := led.Open(ready)
	if err != nil {
		return nil, fmt.Errorf("--led-ready %s: %w", ready, err)
	}
	al, err := led.Open(f.ledActivity)
	if err != nil {
		_ = rl.Close()
		return nil, fmt.Errorf("--led-activity %s: %w", f.ledActivity, err)
	}
	b := led.NewBoard(rl, al, nil, log)
	b.Watch(led.StateFile(filepath.Join(f.runDir, led.StateFileName), log))
	b.SetReadiness(led.Starting)
	return b, nil
}

// apply checks the flags and puts them into an agent's configuration.
func (f *nodeFlags) apply(c *agent.Config) error {
	if f.streamPort < 1 || f.streamPort > 65535 {
		return fmt.Errorf("--stream-port %d: want a port from 1 to 65535", f.streamPort)
	}
	if f.podResync < time.Second {
		return fmt.Errorf("--pod-resync %v: want at least 1s", f.podResync)
	}
	if f.maxPods < 1 {
		return fmt.Errorf("--max-pods %d: want at least 1", f.maxPods)
	}
	if !filepath.IsAbs(f.runDir) {
		return fmt.Errorf("--run-dir %q: want an absolute path", f.runDir)
	}
	switch {
	case f.containerd == "none":
	case !filepath.IsAbs(f.containerd):
		return fmt.Errorf("--containerd %q: want the absolute path of containerd's socket, or none", f.containerd)
	default:
		c.Containerd = f.containerd
	}
	cpu, err := resource.ParseQuantity(f.reservedCPU)
	if err != nil || cpu.Sign() < 0 {
		return fmt.Errorf("--reserved-cpu %q: want a CPU amount such as 250m or 1", f.reservedCPU)
	}
	mem, err := resource.ParseQuantity(f.reservedMem)
	if err != nil || mem.Sign() < 0 {
		return fmt.Errorf("--reserved-memory %q: want a size such as 128Mi", f.reservedMem)
	}
	disk, err := resource.ParseQuantity(f.reservedDisk)
	if err != nil || disk.Sign() < 0 {
		return fmt.Errorf("--reserved-storage %q: want a size such as 1Gi", f.reservedDisk)
	}
	if !path.IsAbs(f.cgroupParent) || path.Clean(f.cgroupParent) != f.cgroupParent || f.cgroupParent == "/" {
		return fmt.Errorf("--cgroup-parent %q: want a clean absolute cgroup path such as /isle", f.cgroupParent)
	}
	for _, m := range f.mirrors {
		host, endpoint, ok := strings.Cut(m, "=")
		if !ok {
			return fmt.Errorf("--registry-mirror %q: want HOST=http://ADDR:PORT", m)
		}
		if err := containers.CheckMirror(host, endpoint); err != nil {
			return fmt.Errorf("--registry-mirror: %w", err)
		}
		if c.RegistryMirrors == nil {
			c.RegistryMirrors = map[string]string{}
		}
		c.RegistryMirrors[host] = endpoint
	}
	for _, r := range f.insecure {
		if r == "" || strings.ContainsAny(r, "/ =") {
			return fmt.Errorf("--insecure-registry %q: want HOST or HOST:PORT as in images' names", r)
		}
	}
	c.InsecureRegistries = f.insecure
	cidr, err := netip.ParsePrefix(f.clusterCIDR)
	if err != nil || !cidr.Addr().Is4() || cidr.Masked() != cidr || cidr.Bits() > 22 {
		return fmt.Errorf("--cluster-cidr %q: want an IPv4 range of at least 4 /24s, such as 10.42.0.0/16", f.clusterCIDR)
	}
	c.ClusterCIDR, c.CgroupParent = cidr, f.cgroupParent
	if c.ClusterDNS, err = netip.ParseAddr(f.clusterDNS); err != nil || !c.ClusterDNS.Is4() {
		return fmt.Errorf("--cluster-dns %q: want an IPv4 address of the service range, such as 10.43.0.10", f.clusterDNS)
	}
	if errs := validation.IsDNS1123Subdomain(f.domain); len(errs) > 0 {
		return fmt.Errorf("--cluster-domain %q: %s", f.domain, strings.Join(errs, "; "))
	}
	if !filepath.IsAbs(f.resolvConf) {
		return fmt.Errorf("--resolv-conf %q: want an absolute path", f.resolvConf)
	}
	c.ClusterDomain, c.ResolvConf = f.domain, f.resolvConf
	if f.ingressHTTP != "none" {
		for flag, addr := range map[string]string{"--ingress-http": f.ingressHTTP, "--ingress-https": f.ingressHTTPS} {
			if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
				return fmt.Errorf("%s %q: want [ADDRESS]:PORT, such as :80", flag, addr)
			}
		}
		c.IngressHTTP, c.IngressHTTPS = f.ingressHTTP, f.ingressHTTPS
	}
	c.ContainerdNamespace, c.RunDir, c.StreamPort, c.PodResync, c.MaxPods = f.namespace, f.runDir, f.streamPort, f.podResync, f.maxPods
	c.ReservedCPU, c.ReservedMemory, c.ReservedStorage = cpu.MilliValue(), mem.Value(), disk.Value()
	return nil
}

// inMemory says whether dir is on a tmpfs or ramfs, which no write wears.
func inMemory(dir string) (bool, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return false, fmt.Errorf("statfs %s: %w", dir, err)
	}
	// The type is an int32 on 32-bit ARM, where RAMFS_MAGIC does not fit:
	// compare the 32 bits of the magic number.
	t := uint32(fs.Type)
	return t == unix.TMPFS_MAGIC || t == unix.RAMFS_MAGIC, nil
}
