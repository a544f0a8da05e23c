package printers

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceQuotas prints core/v1 ResourceQuotas: NAME REQUEST LIMIT AGE,
// each resource as used/hard, those named limits.* under LIMIT.
var ResourceQuotas = &Printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn(),
		column("Request", typeString, "Request represents a minimum amount of cpu/memory that a container may consume."),
		column("Limit", typeString, "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
		ageColumn(),
	},
	rows: typed(cells(printResourceQuota), func(l *corev1.ResourceQuotaList) []corev1.ResourceQuota { return l.Items }),
}

func printResourceQuota(q *corev1.ResourceQuota, now time.Time) []interface{} {
	names := make([]string, 0, len(q.Status.Hard))
	for name := range q.Status.Hard {
		names = append(names, string(name))
	}
	slices.Sort(names)
	var requests, limits []string
	for _, name := range names {
		used, hard := q.Status.Used[corev1.ResourceName(name)], q.Status.Hard[corev1.ResourceName(name)]
		cell := fmt.Sprintf("%s: %s/%s", name, used.String(), hard.String())
		if prefix, _, ok := strings.Cut(name, "."); ok && prefix == "limits" {
			limits = append(limits, cell)
		} else {
			requests = append(requests, cell)
		}
	}
	return []interface{}{q.Name, strings.Join(requests, ", "), strings.Join(limits, ", "), since(q.CreationTimestamp, now)}
}

// LimitRanges prints core/v1 LimitRanges: NAME CREATED AT.
var LimitRanges = &Printer{
	columns: []metav1.TableColumnDefinition{nameColumn(), createdAtColumn()},
	rows: typed(cells(func(lr *corev1.LimitRange, _ time.Time) []interface{} {
		return []interface{}{lr.Name, lr.CreationTimestamp.UTC().Format(time.RFC3339)}
	}), func(l *corev1.LimitRangeList) []corev1.LimitRange { return l.Items }),
}
