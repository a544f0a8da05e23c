package printers

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Placeholders kubectl users know from Kubernetes' printers.
const (
	none    = "<none>"
	unknown = "<unknown>"
	unset   = "<unset>"
)

// since renders the time from t to now like the AGE column:
// duration.HumanDuration, "<unknown>" for a zero time.
func since(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return unknown
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// sinceMicro is since for a MicroTime.
func sinceMicro(t metav1.MicroTime, now time.Time) string {
	if t.IsZero() {
		return unknown
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// containerCells lays out a template's containers as two comma-separated
// cells: their names and their images.
func containerCells(containers []corev1.Container) (names, images string) {
	n := make([]string, len(containers))
	im := make([]string, len(containers))
	for i := range containers {
		n[i] = containers[i].Name
		im[i] = containers[i].Image
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

// shortList collects at most limit strings and counts all it was offered,
// for cells like "10.0.0.1,10.0.0.2,10.0.0.3 + 2 more...".
type shortList struct {
	limit int
	items []string
	total int
}

func (l *shortList) add(s string) {
	if len(l.items) < l.limit {
		l.items = append(l.items, s)
	}
	l.total++
}

// String joins the collected items with commas, tells how many were left
// out, and is "<unset>" when nothing was added.
func (l *shortList) String() string {
	s := strings.Join(l.items, ",")
	if l.total > l.limit {
		return fmt.Sprintf("%s + %d more...", s, l.total-l.limit)
	}
	if s == "" {
		return unset
	}
	return s
}

// quantity renders q like resource.Quantity.String ("<nil>" for nil)
// without caching the string in q: printers never write to the objects they
// are given, which callers may share between goroutines.
func quantity(q *resource.Quantity) string {
	if q == nil {
		return "<nil>"
	}
	c := q.DeepCopy()
	return c.String()
}

// sortedUnique returns the distinct non-empty strings of in, sorted.
func sortedUnique(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// loadBalancerAddresses is the ADDRESS / EXTERNAL-IP text of a load
// balancer: each ingress point's IP, or else its hostname, sorted and
// de-duplicated, comma-separated. Kubernetes' API server prints it
// unshortened (it prints for wide output).
func loadBalancerAddresses(ips, hostnames []string) string {
	points := make([]string, len(ips))
	for i := range ips {
		points[i] = ips[i]
		if points[i] == "" {
			points[i] = hostnames[i]
		}
	}
	return strings.Join(sortedUnique(points), ",")
}

// firstNonEmpty returns the first of ss that is not empty.
func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
