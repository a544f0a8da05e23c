package printers

import (
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
)

// Printers of cluster bookkeeping: namespaces, nodes, events, leases.

func printNamespace(ns *corev1.Namespace, now time.Time) []interface{} {
	return []interface{}{ns.Name, string(ns.Status.Phase), since(ns.CreationTimestamp, now)}
}

// Node role labels: node-role.kubernetes.io/<role> (any value) and
// kubernetes.io/role=<role>.
const (
	nodeRolePrefix = "node-role.kubernetes.io/"
	nodeRoleLabel  = "kubernetes.io/role"
)

func printNode(node *corev1.Node, now time.Time) []interface{} {
	return []interface{}{
		node.Name,
		nodeStatus(node),
		nodeRoles(node),
		since(node.CreationTimestamp, now),
		node.Status.NodeInfo.KubeletVersion,
		nodeAddress(node, corev1.NodeInternalIP),
		nodeAddress(node, corev1.NodeExternalIP),
		orUnknown(node.Status.NodeInfo.OSImage),
		orUnknown(node.Status.NodeInfo.KernelVersion),
		orUnknown(node.Status.NodeInfo.ContainerRuntimeVersion),
	}
}

// nodeStatus is Ready, NotReady or Unknown (from the last Ready condition),
// followed by ",SchedulingDisabled" for a cordoned node.
func nodeStatus(node *corev1.Node) string {
	status := "Unknown"
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			status = string(corev1.NodeReady)
		} else {
			status = "Not" + string(corev1.NodeReady)
		}
	}
	if node.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	return status
}

// nodeRoles lists the node's roles from its labels, sorted, or "<none>".
func nodeRoles(node *corev1.Node) string {
	var roles []string
	for k, v := range node.Labels {
		switch {
		case strings.HasPrefix(k, nodeRolePrefix):
			roles = append(roles, strings.TrimPrefix(k, nodeRolePrefix))
		case k == nodeRoleLabel:
			roles = append(roles, v)
		}
	}
	return orNone(strings.Join(sortedUnique(roles), ","))
}

// nodeAddress is the node's first address of type t, or "<none>".
func nodeAddress(node *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range node.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return none
}

// orUnknown returns s, or "<unknown>" when s is empty.
func orUnknown(s string) string {
	if s == "" {
		return unknown
	}
	return s
}

// printEvent prints a core/v1 event. Events written through the
// events.k8s.io API carry eventTime and series instead of the timestamps
// and count.
func printEvent(ev *corev1.Event, now time.Time) []interface{} {
	firstSeen := since(ev.FirstTimestamp, now)
	if ev.FirstTimestamp.IsZero() {
		firstSeen = sinceMicro(ev.EventTime, now)
	}
	lastSeen := since(ev.LastTimestamp, now)
	if ev.LastTimestamp.IsZero() {
		lastSeen = firstSeen
	}
	count := ev.Count
	switch {
	case ev.Series != nil:
		lastSeen = sinceMicro(ev.Series.LastObservedTime, now)
		count = ev.Series.Count
	case count == 0:
		count = 1 // a singleton event of the new API has no count
	}

	object := strings.ToLower(ev.InvolvedObject.Kind)
	if ev.InvolvedObject.Name != "" {
		object = fmt.Sprintf("%s/%s", object, ev.InvolvedObject.Name)
	}

	source := firstNonEmpty(ev.Source.Component, ev.ReportingController)
	if host := firstNonEmpty(ev.Source.Host, ev.ReportingInstance); host != "" {
		source += ", " + host
	}

	return []interface{}{
		lastSeen,
		ev.Type,
		ev.Reason,
		object,
		ev.InvolvedObject.FieldPath,
		source,
		strings.TrimSpace(ev.Message),
		firstSeen,
		int64(count),
		ev.Name,
	}
}

func printLease(lease *coordinationv1.Lease, now time.Time) []interface{} {
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	return []interface{}{lease.Name, holder, since(lease.CreationTimestamp, now)}
}

// printEventV1 prints an events.k8s.io/v1 Event as the core Event it is.
func printEventV1(ev *eventsv1.Event, now time.Time) []interface{} {
	c := &corev1.Event{ObjectMeta: ev.ObjectMeta, InvolvedObject: ev.Regarding, Reason: ev.Reason, Message: ev.Note,
		Source: ev.DeprecatedSource, FirstTimestamp: ev.DeprecatedFirstTimestamp, LastTimestamp: ev.DeprecatedLastTimestamp,
		Count: ev.DeprecatedCount, Type: ev.Type, EventTime: ev.EventTime, ReportingController: ev.ReportingController,
		ReportingInstance: ev.ReportingInstance}
	if s := ev.Series; s != nil {
		c.Series = &corev1.EventSeries{Count: s.Count, LastObservedTime: s.LastObservedTime}
	}
	return printEvent(c, now)
}
