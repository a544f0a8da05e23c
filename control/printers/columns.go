package printers

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Column names, types, priorities and order are Kubernetes 1.32's
// (pkg/printers/internalversion/printers.go, AddHandlers). Descriptions come
// from the API types' documentation, as there.

// Column types of the Table API.
const (
	typeString  = "string"
	typeInteger = "integer"
	typeBoolean = "boolean"
)

// column is a priority 0 column: shown by `kubectl get`.
func column(name, typ, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Description: description}
}

// wide is a priority 1 column: shown by `kubectl get -o wide` only.
func wide(name, typ, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Priority: 1, Description: description}
}

// nameColumn is the NAME column every resource has.
func nameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: typeString, Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}
}

// ageColumn is the AGE column: time since creationTimestamp.
func ageColumn() metav1.TableColumnDefinition {
	return column("Age", typeString, metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"])
}

const (
	containersDescription = "Names of each container in the template."
	imagesDescription     = "Images referenced by each container in the template."
)

var namespaceColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Status", typeString, "The status of the namespace"),
	ageColumn(),
}

var nodeColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Status", typeString, "The status of the node"),
	column("Roles", typeString, "The roles of the node"),
	ageColumn(),
	column("Version", typeString, corev1.NodeSystemInfo{}.SwaggerDoc()["kubeletVersion"]),
	wide("Internal-IP", typeString, corev1.NodeStatus{}.SwaggerDoc()["addresses"]),
	wide("External-IP", typeString, corev1.NodeStatus{}.SwaggerDoc()["addresses"]),
	wide("OS-Image", typeString, corev1.NodeSystemInfo{}.SwaggerDoc()["osImage"]),
	wide("Kernel-Version", typeString, corev1.NodeSystemInfo{}.SwaggerDoc()["kernelVersion"]),
	wide("Container-Runtime", typeString, corev1.NodeSystemInfo{}.SwaggerDoc()["containerRuntimeVersion"]),
}

var podColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Ready", typeString, "The aggregate readiness state of this pod for accepting traffic."),
	column("Status", typeString, "The aggregate status of the containers in this pod."),
	column("Restarts", typeString, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
	ageColumn(),
	wide("IP", typeString, corev1.PodStatus{}.SwaggerDoc()["podIP"]),
	wide("Node", typeString, corev1.PodSpec{}.SwaggerDoc()["nodeName"]),
	wide("Nominated Node", typeString, corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]),
	wide("Readiness Gates", typeString, corev1.PodSpec{}.SwaggerDoc()["readinessGates"]),
}

var serviceColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Type", typeString, corev1.ServiceSpec{}.SwaggerDoc()["type"]),
	column("Cluster-IP", typeString, corev1.ServiceSpec{}.SwaggerDoc()["clusterIP"]),
	column("External-IP", typeString, corev1.ServiceSpec{}.SwaggerDoc()["externalIPs"]),
	column("Port(s)", typeString, corev1.ServiceSpec{}.SwaggerDoc()["ports"]),
	ageColumn(),
	wide("Selector", typeString, corev1.ServiceSpec{}.SwaggerDoc()["selector"]),
}

var configMapColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Data", typeString, corev1.ConfigMap{}.SwaggerDoc()["data"]),
	ageColumn(),
}

var podTemplateColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Containers", typeString, containersDescription),
	column("Images", typeString, imagesDescription),
	column("Pod Labels", typeString, metav1.ObjectMeta{}.SwaggerDoc()["labels"]),
}

var secretColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Type", typeString, corev1.Secret{}.SwaggerDoc()["type"]),
	column("Data", typeString, corev1.Secret{}.SwaggerDoc()["data"]),
	ageColumn(),
}

var serviceAccountColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Secrets", typeString, corev1.ServiceAccount{}.SwaggerDoc()["secrets"]),
	ageColumn(),
}

// eventColumns: NAME is a wide column here, and not the first.
var eventColumns = []metav1.TableColumnDefinition{
	column("Last Seen", typeString, corev1.Event{}.SwaggerDoc()["lastTimestamp"]),
	column("Type", typeString, corev1.Event{}.SwaggerDoc()["type"]),
	column("Reason", typeString, corev1.Event{}.SwaggerDoc()["reason"]),
	column("Object", typeString, corev1.Event{}.SwaggerDoc()["involvedObject"]),
	wide("Subobject", typeString, corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]),
	wide("Source", typeString, corev1.Event{}.SwaggerDoc()["source"]),
	column("Message", typeString, corev1.Event{}.SwaggerDoc()["message"]),
	wide("First Seen", typeString, corev1.Event{}.SwaggerDoc()["firstTimestamp"]),
	wide("Count", typeString, corev1.Event{}.SwaggerDoc()["count"]),
	{Name: "Name", Type: typeString, Format: "name", Priority: 1, Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
}

var persistentVolumeColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Capacity", typeString, corev1.PersistentVolumeSpec{}.SwaggerDoc()["capacity"]),
	column("Access Modes", typeString, corev1.PersistentVolumeSpec{}.SwaggerDoc()["accessModes"]),
	column("Reclaim Policy", typeString, corev1.PersistentVolumeSpec{}.SwaggerDoc()["persistentVolumeReclaimPolicy"]),
	column("Status", typeString, corev1.PersistentVolumeStatus{}.SwaggerDoc()["phase"]),
	column("Claim", typeString, corev1.PersistentVolumeSpec{}.SwaggerDoc()["claimRef"]),
	column("StorageClass", typeString, "StorageClass of the pv"),
	column("VolumeAttributesClass", typeString, "VolumeAttributesClass of the pv"),
	column("Reason", typeString, corev1.PersistentVolumeStatus{}.SwaggerDoc()["reason"]),
	ageColumn(),
	wide("VolumeMode", typeString, corev1.PersistentVolumeSpec{}.SwaggerDoc()["volumeMode"]),
}

var persistentVolumeClaimColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Status", typeString, corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["phase"]),
	column("Volume", typeString, corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeName"]),
	column("Capacity", typeString, corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["capacity"]),
	column("Access Modes", typeString, corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["accessModes"]),
	column("StorageClass", typeString, "StorageClass of the pvc"),
	column("VolumeAttributesClass", typeString, "VolumeAttributesClass of the pvc"),
	ageColumn(),
	wide("VolumeMode", typeString, corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeMode"]),
}

var endpointsColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Endpoints", typeString, corev1.Endpoints{}.SwaggerDoc()["subsets"]),
	ageColumn(),
}

var deploymentColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Ready", typeString, "Number of the pod with ready state"),
	column("Up-to-date", typeString, appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]),
	column("Available", typeString, appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]),
	ageColumn(),
	wide("Containers", typeString, containersDescription),
	wide("Images", typeString, imagesDescription),
	wide("Selector", typeString, appsv1.DeploymentSpec{}.SwaggerDoc()["selector"]),
}

var replicationControllerColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Desired", typeInteger, corev1.ReplicationControllerSpec{}.SwaggerDoc()["replicas"]),
	column("Current", typeInteger, corev1.ReplicationControllerStatus{}.SwaggerDoc()["replicas"]),
	column("Ready", typeInteger, corev1.ReplicationControllerStatus{}.SwaggerDoc()["readyReplicas"]),
	ageColumn(),
	wide("Containers", typeString, containersDescription),
	wide("Images", typeString, imagesDescription),
	wide("Selector", typeString, corev1.ReplicationControllerSpec{}.SwaggerDoc()["selector"]),
}

var replicaSetColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Desired", typeInteger, appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]),
	column("Current", typeInteger, appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]),
	column("Ready", typeInteger, appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]),
	ageColumn(),
	wide("Containers", typeString, containersDescription),
	wide("Images", typeString, imagesDescription),
	wide("Selector", typeString, appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"]),
}

var statefulSetColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Ready", typeString, "Number of the pod with ready state"),
	ageColumn(),
	wide("Containers", typeString, containersDescription),
	wide("Images", typeString, imagesDescription),
}

var controllerRevisionColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Controller", typeString, "Controller of the object"),
	column("Revision", typeInteger, appsv1.ControllerRevision{}.SwaggerDoc()["revision"]),
	ageColumn(),
}

var daemonSetColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Desired", typeInteger, appsv1.DaemonSetStatus{}.SwaggerDoc()["desiredNumberScheduled"]),
	column("Current", typeInteger, appsv1.DaemonSetStatus{}.SwaggerDoc()["currentNumberScheduled"]),
	column("Ready", typeInteger, appsv1.DaemonSetStatus{}.SwaggerDoc()["numberReady"]),
	column("Up-to-date", typeInteger, appsv1.DaemonSetStatus{}.SwaggerDoc()["updatedNumberScheduled"]),
	column("Available", typeInteger, appsv1.DaemonSetStatus{}.SwaggerDoc()["numberAvailable"]),
	column("Node Selector", typeString, corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]),
	ageColumn(),
	wide("Containers", typeString, containersDescription),
	wide("Images", typeString, imagesDescription),
	wide("Selector", typeString, appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"]),
}

var priorityClassColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Value", typeInteger, schedulingv1.PriorityClass{}.SwaggerDoc()["value"]),
	column("Global-Default", typeBoolean, schedulingv1.PriorityClass{}.SwaggerDoc()["globalDefault"]),
	ageColumn(),
	column("PreemptionPolicy", typeString, schedulingv1.PriorityClass{}.SwaggerDoc()["preemptionPolicy"]),
}

var pdbColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Min Available", typeString, "The minimum number of pods that must be available, either an absolute number or a percentage."),
	column("Max Unavailable", typeString, "The maximum number of pods that may be unavailable, either an absolute number or a percentage."),
	column("Allowed Disruptions", typeInteger, "Calculated number of pods that may be disrupted at this time."),
	ageColumn(),
}

var cronJobColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Schedule", typeString, batchv1.CronJobSpec{}.SwaggerDoc()["schedule"]),
	column("Timezone", typeString, batchv1.CronJobSpec{}.SwaggerDoc()["timeZone"]),
	column("Suspend", typeBoolean, batchv1.CronJobSpec{}.SwaggerDoc()["suspend"]),
	column("Active", typeInteger, batchv1.CronJobStatus{}.SwaggerDoc()["active"]),
	column("Last Schedule", typeString, batchv1.CronJobStatus{}.SwaggerDoc()["lastScheduleTime"]),
	ageColumn(),
	wide("Containers", typeString, containersDescription),
	wide("Images", typeString, imagesDescription),
	wide("Selector", typeString, batchv1.JobSpec{}.SwaggerDoc()["selector"]),
}

var jobColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Status", typeString, "Status of the job."),
	column("Completions", typeString, batchv1.JobStatus{}.SwaggerDoc()["succeeded"]),
	column("Duration", typeString, "Time required to complete the job."),
	ageColumn(),
	wide("Containers", typeString, containersDescription),
	wide("Images", typeString, imagesDescription),
	wide("Selector", typeString, batchv1.JobSpec{}.SwaggerDoc()["selector"]),
}

var endpointSliceColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("AddressType", typeString, discoveryv1.EndpointSlice{}.SwaggerDoc()["addressType"]),
	column("Ports", typeString, discoveryv1.EndpointSlice{}.SwaggerDoc()["ports"]),
	column("Endpoints", typeString, discoveryv1.EndpointSlice{}.SwaggerDoc()["endpoints"]),
	ageColumn(),
}

var ingressColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Class", typeString, "The name of the IngressClass resource that should be used for additional configuration"),
	column("Hosts", typeString, "Hosts that incoming requests are matched against before the ingress rule"),
	column("Address", typeString, "Address is a list containing ingress points for the load-balancer"),
	column("Ports", typeString, "Ports of TLS configurations that open"),
	ageColumn(),
}

var ingressClassColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Controller", typeString, "Controller that is responsible for handling this class"),
	column("Parameters", typeString, "A reference to a resource with additional parameters"),
	ageColumn(),
}

var networkPolicyColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Pod-Selector", typeString, networkingv1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"]),
	ageColumn(),
}

var hpaColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Reference", typeString, autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["scaleTargetRef"]),
	column("Targets", typeString, autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["metrics"]),
	column("MinPods", typeString, autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["minReplicas"]),
	column("MaxPods", typeString, autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["maxReplicas"]),
	column("Replicas", typeString, autoscalingv2.HorizontalPodAutoscalerStatus{}.SwaggerDoc()["currentReplicas"]),
	ageColumn(),
}

var storageClassColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Provisioner", typeString, storagev1.StorageClass{}.SwaggerDoc()["provisioner"]),
	column("ReclaimPolicy", typeString, storagev1.StorageClass{}.SwaggerDoc()["reclaimPolicy"]),
	column("VolumeBindingMode", typeString, storagev1.StorageClass{}.SwaggerDoc()["volumeBindingMode"]),
	column("AllowVolumeExpansion", typeString, storagev1.StorageClass{}.SwaggerDoc()["allowVolumeExpansion"]),
	ageColumn(),
}

var leaseColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Holder", typeString, coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]),
	ageColumn(),
}
