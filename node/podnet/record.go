package podnet

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// record is what the Pod network holds for one attached pod; its file is
// the only truth about the pod's address.
type record struct {
	UID       types.UID  `json:"uid"`
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	IP        netip.Addr `json:"ip"`
	Netns     string     `json:"netns"`
	HostPorts []hostPort `json:"hostPorts,omitempty"`
}

// hostPort is one hostPort mapping of a pod: traffic to the board's
// address (HostIP, or any local one if unset) on HostPort goes to the
// pod's ContainerPort.
type hostPort struct {
	Protocol      corev1.Protocol `json:"protocol"`
	HostIP        netip.Addr      `json:"hostIP,omitzero"`
	HostPort      uint16          `json:"hostPort"`
	ContainerPort uint16          `json:"containerPort"`
}

func (h hostPort) String() string {
	ip := "*"
	if h.HostIP.IsValid() {
		ip = h.HostIP.String()
	}
	return fmt.Sprintf("%s:%d/%s", ip, h.HostPort, h.Protocol)
}

// overlaps reports whether h and o take the same port of some address.
func (h hostPort) overlaps(o hostPort) bool {
	return h.Protocol == o.Protocol && h.HostPort == o.HostPort &&
		(!h.HostIP.IsValid() || !o.HostIP.IsValid() || h.HostIP == o.HostIP)
}

func (r *record) key() string { return r.Namespace + "/" + r.Name }

// uidPattern is what a UID may look like here: it names a file.
var uidPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func checkUID(uid types.UID) error {
	if !uidPattern.MatchString(string(uid)) {
		return fmt.Errorf("pod UID %q: want 1 to 128 letters, digits, '.', '_' or '-'", uid)
	}
	return nil
}

func checkNetnsPath(p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return fmt.Errorf("network namespace path %q: want a clean absolute path", p)
	}
	return nil
}

// vethName is the name of the board's end of a pod's veth: "veth" and 8
// hex digits of a hash of the UID (the kernel allows 15 characters).
func vethName(uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	return "veth" + hex.EncodeToString(sum[:4])
}

// hostPortsOf reads the hostPorts of pod's containers (init containers
// included, as the kubelet does); a port listed twice alike counts once.
func hostPortsOf(pod *corev1.Pod) ([]hostPort, error) {
	var out []hostPort
	var errs []error
	containers := slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers)
	for _, c := range containers {
		for i, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			hp, err := parseHostPort(p)
			if err != nil {
				errs = append(errs, fmt.Errorf("container %q port %d: %w", c.Name, i, err))
				continue
			}
			if slices.Contains(out, hp) {
				continue
			}
			for _, o := range out {
				if o.overlaps(hp) {
					errs = append(errs, fmt.Errorf("container %q: hostPort %v is taken twice in the pod", c.Name, hp))
				}
			}
			out = append(out, hp)
		}
	}
	return out, errors.Join(errs...)
}

func parseHostPort(p corev1.ContainerPort) (hostPort, error) {
	hp := hostPort{Protocol: p.Protocol}
	if hp.Protocol == "" {
		hp.Protocol = corev1.ProtocolTCP
	}
	if hp.Protocol != corev1.ProtocolTCP && hp.Protocol != corev1.ProtocolUDP {
		return hp, fmt.Errorf("hostPort %d: protocol %q not supported (want TCP or UDP)", p.HostPort, p.Protocol)
	}
	if p.HostPort < 1 || p.HostPort > 65535 {
		return hp, fmt.Errorf("hostPort %d: want 1..65535", p.HostPort)
	}
	if p.ContainerPort < 1 || p.ContainerPort > 65535 {
		return hp, fmt.Errorf("hostPort %d: containerPort %d: want 1..65535", p.HostPort, p.ContainerPort)
	}
	hp.HostPort, hp.ContainerPort = uint16(p.HostPort), uint16(p.ContainerPort)
	if p.HostIP != "" {
		ip, err := netip.ParseAddr(p.HostIP)
		if err != nil || !ip.Is4() {
			return hp, fmt.Errorf("hostPort %d: hostIP %q: want an IPv4 address", p.HostPort, p.HostIP)
		}
		if !ip.IsUnspecified() {
			hp.HostIP = ip
		}
	}
	return hp, nil
}

// conflict returns an error if one of ports is taken by a record other
// than the one of uid.
func conflict(uid types.UID, ports []hostPort, records map[types.UID]*record) error {
	var errs []error
	for _, hp := range ports {
		for _, r := range records {
			if r.UID == uid {
				continue
			}
			for _, o := range r.HostPorts {
				if o.overlaps(hp) {
					errs = append(errs, fmt.Errorf("hostPort %v is taken by pod %s (%v)", hp, r.key(), o))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// parseRecord reads the record in file (named for its UID) and checks it.
func parseRecord(file string, data []byte, cluster netip.Prefix) (*record, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("podnet: record %s: empty", file)
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	var r record
	if err := d.Decode(&r); err != nil {
		return nil, fmt.Errorf("podnet: record %s: %w", file, err)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("podnet: record %s: "+format, append([]any{file}, a...)...)
	}
	if err := checkUID(r.UID); err != nil {
		return nil, bad("%w", err)
	}
	if want := recordName(r.UID); filepath.Base(file) != want {
		return nil, bad("holds pod UID %s, whose record is %s", r.UID, want)
	}
	if !r.IP.Is4() || !cluster.Contains(r.IP) {
		return nil, bad("ip %v: want an IPv4 address inside the cluster CIDR %v", r.IP, cluster)
	}
	if err := checkNetnsPath(r.Netns); err != nil {
		return nil, bad("%w", err)
	}
	for _, hp := range r.HostPorts {
		if (hp.Protocol != corev1.ProtocolTCP && hp.Protocol != corev1.ProtocolUDP) || hp.HostPort == 0 || hp.ContainerPort == 0 ||
			(hp.HostIP.IsValid() && (!hp.HostIP.Is4() || hp.HostIP.IsUnspecified())) {
			return nil, bad("bad hostPort %+v", hp)
		}
	}
	return &r, nil
}

// recordName is the file name of the record of uid.
func recordName(uid types.UID) string { return "pod-" + string(uid) + ".json" }
