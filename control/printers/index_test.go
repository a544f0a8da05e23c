package printers

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// byResource indexes the printers by resource for the tests, as the
// registry's table of kinds does for the API server.
var byResource = map[schema.GroupResource]*Printer{
	gr("", "namespaces"): Namespaces, gr("", "nodes"): Nodes, gr("", "pods"): Pods,
	gr("", "services"): Services, gr("", "configmaps"): ConfigMaps, gr("", "podtemplates"): PodTemplates,
	gr("", "secrets"): Secrets, gr("", "serviceaccounts"): ServiceAccounts, gr("", "events"): Events,
	gr("", "persistentvolumes"): PersistentVolumes, gr("", "persistentvolumeclaims"): PersistentVolumeClaims,
	gr("", "endpoints"): Endpoints, gr("", "resourcequotas"): ResourceQuotas, gr("", "limitranges"): LimitRanges, gr("apps", "deployments"): Deployments, gr("apps", "replicasets"): ReplicaSets,
	gr("apps", "daemonsets"): DaemonSets, gr("batch", "jobs"): Jobs, gr("batch", "cronjobs"): CronJobs,
	gr("apps", "statefulsets"): StatefulSets, gr("apps", "controllerrevisions"): ControllerRevisions,
	gr("", "replicationcontrollers"): ReplicationControllers, gr("policy", "poddisruptionbudgets"): PodDisruptionBudgets,
	gr("scheduling.k8s.io", "priorityclasses"): PriorityClasses, gr("discovery.k8s.io", "endpointslices"): EndpointSlices,
	gr("networking.k8s.io", "ingresses"): Ingresses, gr("networking.k8s.io", "ingressclasses"): IngressClasses,
	gr("autoscaling", "horizontalpodautoscalers"): HorizontalPodAutoscalers,
	gr("storage.k8s.io", "storageclasses"):        StorageClasses, gr("coordination.k8s.io", "leases"): Leases,
	gr("rbac.authorization.k8s.io", "roles"): Roles, gr("rbac.authorization.k8s.io", "clusterroles"): ClusterRoles,
	gr("rbac.authorization.k8s.io", "rolebindings"): RoleBindings, gr("rbac.authorization.k8s.io", "clusterrolebindings"): ClusterRoleBindings,
}

func gr(group, resource string) schema.GroupResource {
	return schema.GroupResource{Group: group, Resource: resource}
}

// Columns returns the columns of a resource's printer; ok is false for a
// resource without one.
func Columns(resource schema.GroupResource) ([]metav1.TableColumnDefinition, bool) {
	p, ok := byResource[resource]
	if !ok {
		return nil, false
	}
	return p.Columns(), true
}

// Rows prints obj with the printer that handles its type.
func Rows(obj runtime.Object, now time.Time) ([]metav1.TableRow, error) {
	for _, p := range byResource {
		rows, err := p.Rows(obj, now)
		if !errors.Is(err, ErrUnknownType) {
			return rows, err
		}
	}
	return nil, fmt.Errorf("printers: rows for %T: %w", obj, ErrUnknownType)
}
