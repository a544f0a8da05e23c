package wire

import (
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// ReportPath is where agents POST their reports, on a server's API port.
const ReportPath = "/isle/v1/stats"

// ReportInterval is how often an agent reports: metrics-server's default
// resolution, and the HPA controller's sync period.
const ReportInterval = 15 * time.Second

// Bounds of a report.
const (
	// MaxReportBytes bounds a report's body. 250 pods of a few containers
	// take about 100 KiB.
	MaxReportBytes = 1 << 20
	// MaxPodsPerReport is above the kubelet's default of 110 pods a node.
	MaxPodsPerReport = 250
	// MaxContainersPerPod bounds a pod's containers (and sidecars).
	MaxContainersPerPod = 64
	// MinWindow and MaxWindow bound a report's window.
	MinWindow = time.Second
	MaxWindow = 10 * time.Minute
	// MaxClockSkew is how far a report's timestamp may be from the
	// server's clock. Boards have no real-time clock: one that has not set
	// its clock yet (NTP) would report usage from 1970.
	MaxClockSkew = 5 * time.Minute
)

// Sanity bounds of a usage: no board has more.
var (
	maxCPU    = resource.MustParse("4096")
	maxMemory = *resource.NewQuantity(1<<50, resource.BinarySI) // 1 PiB
)

// Report is what an agent sends: its board's usage and its pods'.
type Report struct {
	// Timestamp and Window: every usage in the report is the average over
	// [Timestamp-Window, Timestamp].
	Timestamp metav1.Time     `json:"timestamp"`
	Window    metav1.Duration `json:"window"`
	// Node is the board's usage: cpu (cores) and memory (working set,
	// bytes), both required.
	Node corev1.ResourceList `json:"node"`
	// Pods are the running pods bound to the board.
	Pods []PodUsage `json:"pods"`
}

// PodUsage is one pod's usage, per container, as in metrics.k8s.io.
type PodUsage struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	// Containers have cpu and memory, both required.
	Containers []metricsv1beta1.ContainerMetrics `json:"containers"`
	// Network is what the pod's own network interface carried in the
	// window; nil for a pod on the board's network, or not measured.
	Network *PodNetwork `json:"network,omitempty"`
}

// PodNetwork is the bytes a pod received and sent in a report's window
// (what the kubelet's Summary API reports as a pod's rxBytes and txBytes,
// as a difference).
type PodNetwork struct {
	RxBytes uint64 `json:"rxBytes"`
	TxBytes uint64 `json:"txBytes"`
}

// MaxNetworkBytes bounds a pod's bytes in one window: more than a 10 Gb/s
// link carries in MaxWindow.
const MaxNetworkBytes = 1 << 40

// Validate checks a report received at now.
func (r *Report) Validate(now time.Time) field.ErrorList {
	var errs field.ErrorList
	ts := field.NewPath("timestamp")
	switch {
	case r.Timestamp.IsZero():
		errs = append(errs, field.Required(ts, ""))
	case r.Timestamp.Sub(now).Abs() > MaxClockSkew:
		errs = append(errs, field.Invalid(ts, r.Timestamp.UTC().Format(time.RFC3339),
			fmt.Sprintf("is %v off this server's clock (%v allowed): is the board's clock set (NTP)?",
				r.Timestamp.Sub(now).Round(time.Second), MaxClockSkew)))
	}
	if w := r.Window.Duration; w < MinWindow || w > MaxWindow {
		errs = append(errs, field.Invalid(field.NewPath("window"), w.String(), fmt.Sprintf("must be between %v and %v", MinWindow, MaxWindow)))
	}
	errs = append(errs, validateUsage(r.Node, field.NewPath("node"))...)
	pods := field.NewPath("pods")
	if len(r.Pods) > MaxPodsPerReport {
		return append(errs, field.TooMany(pods, len(r.Pods), MaxPodsPerReport))
	}
	seen := make(map[string]bool, len(r.Pods))
	for i := range r.Pods {
		p := &r.Pods[i]
		pp := pods.Index(i)
		for _, msg := range validation.IsDNS1123Label(p.Namespace) {
			errs = append(errs, field.Invalid(pp.Child("namespace"), p.Namespace, msg))
		}
		for _, msg := range validation.IsDNS1123Subdomain(p.Name) {
			errs = append(errs, field.Invalid(pp.Child("name"), p.Name, msg))
		}
		switch {
		case p.UID == "":
			errs = append(errs, field.Required(pp.Child("uid"), ""))
		case len(p.UID) > 128:
			errs = append(errs, field.TooLong(pp.Child("uid"), "", 128))
		}
		if key := p.Namespace + "/" + p.Name; seen[key] {
			errs = append(errs, field.Duplicate(pp, key))
		} else {
			seen[key] = true
		}
		errs = append(errs, validateContainers(p.Containers, pp.Child("containers"))...)
		if n := p.Network; n != nil {
			for _, v := range []struct {
				name  string
				bytes uint64
			}{{"rxBytes", n.RxBytes}, {"txBytes", n.TxBytes}} {
				if v.bytes > MaxNetworkBytes {
					errs = append(errs, field.Invalid(pp.Child("network", v.name), v.bytes, fmt.Sprintf("must be at most %d in one window", uint64(MaxNetworkBytes))))
				}
			}
		}
	}
	return errs
}

func validateContainers(cs []metricsv1beta1.ContainerMetrics, path *field.Path) field.ErrorList {
	switch {
	case len(cs) == 0:
		return field.ErrorList{field.Required(path, "a running pod has at least one container")}
	case len(cs) > MaxContainersPerPod:
		return field.ErrorList{field.TooMany(path, len(cs), MaxContainersPerPod)}
	}
	var errs field.ErrorList
	names := make([]string, 0, len(cs))
	for i, c := range cs {
		cp := path.Index(i)
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(cp.Child("name"), c.Name, msg))
		}
		if slices.Contains(names, c.Name) {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		}
		names = append(names, c.Name)
		errs = append(errs, validateUsage(c.Usage, cp.Child("usage"))...)
	}
	return errs
}

// validateUsage wants exactly cpu and memory, within sane bounds.
func validateUsage(u corev1.ResourceList, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := u[name]; !ok {
			errs = append(errs, field.Required(path.Key(string(name)), ""))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(u)) {
		q, p := u[name], path.Key(string(name))
		limit := maxMemory
		switch name {
		case corev1.ResourceCPU:
			limit = maxCPU
		case corev1.ResourceMemory:
		default:
			errs = append(errs, field.NotSupported(p, name, []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}))
			continue
		}
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(p, q.String(), "must be greater than or equal to 0"))
		}
		if q.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(p, q.String(), "must be less than or equal to "+limit.String()))
		}
	}
	return errs
}
