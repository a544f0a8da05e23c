package printers

import (
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ErrUnknownType is returned (wrapped) by Rows for an object no printer
// handles.
var ErrUnknownType = errors.New("no printer for this type")

// ErrNilObject is returned (wrapped) by Rows for a nil object or a nil
// pointer of a known type.
var ErrNilObject = errors.New("nil object")

// rowsFunc prints obj if it is the item or the list type the function was
// built for; handled is false otherwise.
type rowsFunc func(obj runtime.Object, now time.Time) (rows []metav1.TableRow, handled bool, err error)

// Printer is one resource's table: its columns and how to turn its objects
// (items or lists) into rows.
type Printer struct {
	columns []metav1.TableColumnDefinition
	rows    rowsFunc
}

// Columns returns the column definitions; the NAME column has Type
// "string", Format "name". The slice is the caller's to keep or change.
func (p *Printer) Columns() []metav1.TableColumnDefinition {
	return append([]metav1.TableColumnDefinition(nil), p.columns...)
}

// Rows converts one object (pointer to the printer's k8s.io/api type) or a
// list of them (e.g. *corev1.PodList) into rows with Cells in Columns
// order. Row.Object is left empty (the API server fills it with
// PartialObjectMetadata). now is the time AGE and other durations are
// measured to.
func (p *Printer) Rows(obj runtime.Object, now time.Time) ([]metav1.TableRow, error) {
	if obj == nil {
		return nil, fmt.Errorf("printers: rows: %w", ErrNilObject)
	}
	rows, handled, err := p.rows(obj, now)
	if !handled {
		return nil, fmt.Errorf("printers: rows for %T: %w", obj, ErrUnknownType)
	}
	if err != nil {
		return nil, fmt.Errorf("printers: rows for %T: %w", obj, err)
	}
	return rows, nil
}

// The printers of the served resources, in the order of the resource list
// of the API spec.
var (
	Namespaces      = &Printer{columns: namespaceColumns, rows: typed(cells(printNamespace), func(l *corev1.NamespaceList) []corev1.Namespace { return l.Items })}
	Nodes           = &Printer{columns: nodeColumns, rows: typed(cells(printNode), func(l *corev1.NodeList) []corev1.Node { return l.Items })}
	Pods            = &Printer{columns: podColumns, rows: typed(printPod, func(l *corev1.PodList) []corev1.Pod { return l.Items })}
	Services        = &Printer{columns: serviceColumns, rows: typed(cells(printService), func(l *corev1.ServiceList) []corev1.Service { return l.Items })}
	ConfigMaps      = &Printer{columns: configMapColumns, rows: typed(cells(printConfigMap), func(l *corev1.ConfigMapList) []corev1.ConfigMap { return l.Items })}
	PodTemplates    = &Printer{columns: podTemplateColumns, rows: typed(cells(printPodTemplate), func(l *corev1.PodTemplateList) []corev1.PodTemplate { return l.Items })}
	Secrets         = &Printer{columns: secretColumns, rows: typed(cells(printSecret), func(l *corev1.SecretList) []corev1.Secret { return l.Items })}
	ServiceAccounts = &Printer{columns: serviceAccountColumns, rows: typed(cells(printServiceAccount), func(l *corev1.ServiceAccountList) []corev1.ServiceAccount { return l.Items })}
	Events          = &Printer{columns: eventColumns, rows: firstOf(
		typed(cells(printEvent), func(l *corev1.EventList) []corev1.Event { return l.Items }),
		typed(cells(printEventV1), func(l *eventsv1.EventList) []eventsv1.Event { return l.Items }),
	)}
	PersistentVolumes        = &Printer{columns: persistentVolumeColumns, rows: typed(cells(printPersistentVolume), func(l *corev1.PersistentVolumeList) []corev1.PersistentVolume { return l.Items })}
	PersistentVolumeClaims   = &Printer{columns: persistentVolumeClaimColumns, rows: typed(cells(printPersistentVolumeClaim), func(l *corev1.PersistentVolumeClaimList) []corev1.PersistentVolumeClaim { return l.Items })}
	Endpoints                = &Printer{columns: endpointsColumns, rows: typed(cells(printEndpoints), func(l *corev1.EndpointsList) []corev1.Endpoints { return l.Items })}
	Deployments              = &Printer{columns: deploymentColumns, rows: typed(cells(printDeployment), func(l *appsv1.DeploymentList) []appsv1.Deployment { return l.Items })}
	ReplicationControllers   = &Printer{columns: replicationControllerColumns, rows: typed(cells(printReplicationController), func(l *corev1.ReplicationControllerList) []corev1.ReplicationController { return l.Items })}
	ReplicaSets              = &Printer{columns: replicaSetColumns, rows: typed(cells(printReplicaSet), func(l *appsv1.ReplicaSetList) []appsv1.ReplicaSet { return l.Items })}
	StatefulSets             = &Printer{columns: statefulSetColumns, rows: typed(cells(printStatefulSet), func(l *appsv1.StatefulSetList) []appsv1.StatefulSet { return l.Items })}
	ControllerRevisions      = &Printer{columns: controllerRevisionColumns, rows: typed(cells(printControllerRevision), func(l *appsv1.ControllerRevisionList) []appsv1.ControllerRevision { return l.Items })}
	DaemonSets               = &Printer{columns: daemonSetColumns, rows: typed(cells(printDaemonSet), func(l *appsv1.DaemonSetList) []appsv1.DaemonSet { return l.Items })}
	PriorityClasses          = &Printer{columns: priorityClassColumns, rows: typed(cells(printPriorityClass), func(l *schedulingv1.PriorityClassList) []schedulingv1.PriorityClass { return l.Items })}
	PodDisruptionBudgets     = &Printer{columns: pdbColumns, rows: typed(cells(printPodDisruptionBudget), func(l *policyv1.PodDisruptionBudgetList) []policyv1.PodDisruptionBudget { return l.Items })}
	CronJobs                 = &Printer{columns: cronJobColumns, rows: typed(cells(printCronJob), func(l *batchv1.CronJobList) []batchv1.CronJob { return l.Items })}
	Jobs                     = &Printer{columns: jobColumns, rows: typed(cells(printJob), func(l *batchv1.JobList) []batchv1.Job { return l.Items })}
	EndpointSlices           = &Printer{columns: endpointSliceColumns, rows: typed(cells(printEndpointSlice), func(l *discoveryv1.EndpointSliceList) []discoveryv1.EndpointSlice { return l.Items })}
	Ingresses                = &Printer{columns: ingressColumns, rows: typed(cells(printIngress), func(l *networkingv1.IngressList) []networkingv1.Ingress { return l.Items })}
	IngressClasses           = &Printer{columns: ingressClassColumns, rows: typed(cells(printIngressClass), func(l *networkingv1.IngressClassList) []networkingv1.IngressClass { return l.Items })}
	NetworkPolicies          = &Printer{columns: networkPolicyColumns, rows: typed(cells(printNetworkPolicy), func(l *networkingv1.NetworkPolicyList) []networkingv1.NetworkPolicy { return l.Items })}
	HorizontalPodAutoscalers = &Printer{columns: hpaColumns, rows: firstOf(
		typed(cells(printHPA), func(l *autoscalingv2.HorizontalPodAutoscalerList) []autoscalingv2.HorizontalPodAutoscaler {
			return l.Items
		}),
		typed(printHPAv1, func(l *autoscalingv1.HorizontalPodAutoscalerList) []autoscalingv1.HorizontalPodAutoscaler {
			return l.Items
		}),
	)}
	StorageClasses = &Printer{columns: storageClassColumns, rows: typed(cells(printStorageClass), func(l *storagev1.StorageClassList) []storagev1.StorageClass { return l.Items })}
	Leases         = &Printer{columns: leaseColumns, rows: typed(cells(printLease), func(l *coordinationv1.LeaseList) []coordinationv1.Lease { return l.Items })}
)

// rowFunc prints one object of type T.
type rowFunc[T any] func(obj *T, now time.Time) (metav1.TableRow, error)

// cells adapts a printer that only produces cells.
func cells[T any](print func(obj *T, now time.Time) []interface{}) rowFunc[T] {
	return func(obj *T, now time.Time) (metav1.TableRow, error) {
		return metav1.TableRow{Cells: print(obj, now)}, nil
	}
}

// typed builds the rowsFunc for item type T and list type L, whose items
// are given by items. A list prints as the rows of its items, in order, so
// Rows(list) and Rows(item) always agree.
func typed[T, L any](print rowFunc[T], items func(*L) []T) rowsFunc {
	return func(obj runtime.Object, now time.Time) ([]metav1.TableRow, bool, error) {
		switch o := any(obj).(type) {
		case *T:
			if o == nil {
				return nil, true, ErrNilObject
			}
			row, err := print(o, now)
			if err != nil {
				return nil, true, err
			}
			return []metav1.TableRow{row}, true, nil
		case *L:
			if o == nil {
				return nil, true, ErrNilObject
			}
			list := items(o)
			rows := make([]metav1.TableRow, 0, len(list))
			for i := range list {
				row, err := print(&list[i], now)
				if err != nil {
					return nil, true, fmt.Errorf("item %d: %w", i, err)
				}
				rows = append(rows, row)
			}
			return rows, true, nil
		}
		return nil, false, nil
	}
}

// firstOf combines the rowsFuncs of one resource served in several
// versions; the first that handles the object prints it.
func firstOf(fns ...rowsFunc) rowsFunc {
	return func(obj runtime.Object, now time.Time) ([]metav1.TableRow, bool, error) {
		for _, fn := range fns {
			if rows, handled, err := fn(obj, now); handled {
				return rows, true, err
			}
		}
		return nil, false, nil
	}
}
