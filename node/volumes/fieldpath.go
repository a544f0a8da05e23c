package volumes

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// podField is the value of the pod field a fieldRef selects, as the
// kubelet gives it. inVolume selects the downward API volume's set
// (metadata only, whole label and annotation maps allowed); otherwise the
// environment's set (subscripted maps, spec and status fields).
func podField(pod *corev1.Pod, fs *corev1.ObjectFieldSelector, inVolume bool) (string, error) {
	if fs.APIVersion != "" && fs.APIVersion != "v1" {
		return "", fmt.Errorf("fieldRef %q: apiVersion %q is not supported (only v1)", fs.FieldPath, fs.APIVersion)
	}
	if base, key, ok := splitSubscript(fs.FieldPath); ok {
		switch base {
		case "metadata.labels":
			return pod.Labels[key], nil
		case "metadata.annotations":
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("fieldRef %q is not supported", fs.FieldPath)
	}
	switch fs.FieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	}
	if inVolume {
		switch fs.FieldPath {
		case "metadata.labels":
			return formatMap(pod.Labels), nil
		case "metadata.annotations":
			return formatMap(pod.Annotations), nil
		}
		return "", fmt.Errorf("fieldRef %q is not supported in a downwardAPI volume", fs.FieldPath)
	}
	switch fs.FieldPath {
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return firstOf(ips(pod.Status.HostIP, pod.Status.HostIPs)), nil
	case "status.hostIPs":
		return strings.Join(ips(pod.Status.HostIP, pod.Status.HostIPs), ","), nil
	case "status.podIP":
		return firstOf(ips(pod.Status.PodIP, pod.Status.PodIPs)), nil
	case "status.podIPs":
		return strings.Join(ips(pod.Status.PodIP, pod.Status.PodIPs), ","), nil
	}
	return "", fmt.Errorf("fieldRef %q is not supported in the environment", fs.FieldPath)
}

// splitSubscript splits metadata.labels['app'] into metadata.labels and app.
func splitSubscript(p string) (base, key string, ok bool) {
	s, ok := strings.CutSuffix(p, "']")
	if !ok {
		return "", "", false
	}
	base, key, ok = strings.Cut(s, "['")
	return base, key, ok && base != ""
}

// formatMap writes a label or annotation map as the downward API does:
// key="quoted value" lines in key order.
func formatMap(m map[string]string) string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(m[k]))
	}
	return b.String()
}

// ips are the addresses of a pod or host status: the list, or the single
// address of older objects.
func ips[T corev1.PodIP | corev1.HostIP](single string, all []T) []string {
	if len(all) == 0 {
		if single == "" {
			return nil
		}
		return []string{single}
	}
	out := make([]string, len(all))
	for i, ip := range all {
		out[i] = struct{ IP string }(ip).IP
	}
	return out
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// containerResource is the value of a resourceFieldRef for container c of
// pod, as the kubelet gives it: the quantity divided by the divisor,
// rounded up. A limit the container does not set is the pod's limit, if
// the pod sets one, else the node's allocatable amount.
func containerResource(pod *corev1.Pod, c *corev1.Container, fs *corev1.ResourceFieldSelector, allocatable corev1.ResourceList) (string, error) {
	kind, name, ok := strings.Cut(fs.Resource, ".")
	rn := corev1.ResourceName(name)
	switch {
	case !ok || (kind != "limits" && kind != "requests"):
		return "", fmt.Errorf("resourceFieldRef %q is not supported", fs.Resource)
	case rn != corev1.ResourceCPU && rn != corev1.ResourceMemory && rn != corev1.ResourceEphemeralStorage &&
		!strings.HasPrefix(name, corev1.ResourceHugePagesPrefix):
		return "", fmt.Errorf("resourceFieldRef %q is not supported", fs.Resource)
	}
	divisor := fs.Divisor
	switch divisor.Sign() {
	case 0:
		divisor = resource.MustParse("1")
	case -1:
		return "", fmt.Errorf("resourceFieldRef %q: divisor %s is negative", fs.Resource, fs.Divisor.String())
	}
	var q resource.Quantity
	if kind == "requests" {
		q = c.Resources.Requests[rn]
	} else {
		var found bool
		if q, found = c.Resources.Limits[rn]; !found {
			if pod.Spec.Resources != nil {
				q, found = pod.Spec.Resources.Limits[rn]
			}
			if !found {
				q = allocatable[rn]
			}
		}
	}
	var v float64
	if rn == corev1.ResourceCPU {
		v = math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue()))
	} else {
		v = math.Ceil(float64(q.Value()) / float64(divisor.Value()))
	}
	return strconv.FormatInt(int64(v), 10), nil
}

// findContainer finds a container, init container included, by name.
func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}
