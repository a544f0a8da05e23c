package registry

import (
	"cmp"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/control/printers"
	"github.com/isle-cluster/isle/control/strategy"
)

// Table is the ordered list of every resource the API server serves: one
// entry per kind and served version. Adding a kind is adding its entry
// here and its strategy (control/strategy) and printer (control/printers).
func Table() []*Resource {
	core, apps, batch, rbac := corev1.SchemeGroupVersion, appsv1.SchemeGroupVersion, batchv1.SchemeGroupVersion, rbacv1.SchemeGroupVersion
	return []*Resource{
		kind(core, "namespaces", "Namespace", false, &corev1.Namespace{}, &corev1.NamespaceList{}, strategy.Namespace, printers.Namespaces).
			short("ns").status().extra("finalize").fields(strategy.NamespaceFields),
		kind(core, "nodes", "Node", false, &corev1.Node{}, &corev1.NodeList{}, strategy.Node, printers.Nodes).
			short("no").status().fields(strategy.NodeFields),
		kind(core, "pods", "Pod", true, &corev1.Pod{}, &corev1.PodList{}, strategy.Pod, printers.Pods).
			short("po").inAll().status().extra("binding", "eviction", "log", "exec").fields(strategy.PodFields).admit(PodAdmission),
		kind(core, "services", "Service", true, &corev1.Service{}, &corev1.ServiceList{}, strategy.Service, printers.Services).
			short("svc").inAll().status().admit(ServiceAdmission),
		kind(core, "configmaps", "ConfigMap", true, &corev1.ConfigMap{}, &corev1.ConfigMapList{}, strategy.ConfigMap, printers.ConfigMaps).
			short("cm"),
		kind(core, "secrets", "Secret", true, &corev1.Secret{}, &corev1.SecretList{}, strategy.Secret, printers.Secrets).
			fields(strategy.SecretFields),
		kind(core, "endpoints", "Endpoints", true, &corev1.Endpoints{}, &corev1.EndpointsList{}, strategy.Endpoints, printers.Endpoints).
			short("ep"),
		kind(core, "replicationcontrollers", "ReplicationController", true, &corev1.ReplicationController{}, &corev1.ReplicationControllerList{},
			strategy.ReplicationController, printers.ReplicationControllers).
			short("rc").inAll().status().scale(strategy.ReplicationControllerReplicas, strategy.SetReplicationControllerReplicas),
		kind(core, "resourcequotas", "ResourceQuota", true, &corev1.ResourceQuota{}, &corev1.ResourceQuotaList{}, strategy.ResourceQuota, printers.ResourceQuotas).
			short("quota").status(),
		kind(core, "limitranges", "LimitRange", true, &corev1.LimitRange{}, &corev1.LimitRangeList{}, strategy.LimitRange, printers.LimitRanges).
			short("limits"),
		kind(core, "podtemplates", "PodTemplate", true, &corev1.PodTemplate{}, &corev1.PodTemplateList{}, strategy.PodTemplate, printers.PodTemplates),
		kind(core, "serviceaccounts", "ServiceAccount", true, &corev1.ServiceAccount{}, &corev1.ServiceAccountList{}, strategy.ServiceAccount, printers.ServiceAccounts).
			short("sa").extra("token"),
		kind(core, "events", "Event", true, &corev1.Event{}, &corev1.EventList{}, strategy.Event, printers.Events).
			short("ev").fields(strategy.EventFields),
		kind(eventsv1.SchemeGroupVersion, "events", "Event", true, &eventsv1.Event{}, &eventsv1.EventList{}, strategy.EventV1, printers.Events).
			short("ev").storedIn(core).convert(strategy.ConvertEvent).fields(strategy.EventV1Fields),
		kind(core, "persistentvolumes", "PersistentVolume", false, &corev1.PersistentVolume{}, &corev1.PersistentVolumeList{}, strategy.PersistentVolume, printers.PersistentVolumes).
			short("pv").status().admit(PersistentVolumeAdmission),
		kind(core, "persistentvolumeclaims", "PersistentVolumeClaim", true, &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolumeClaimList{}, strategy.PersistentVolumeClaim, printers.PersistentVolumeClaims).
			short("pvc").status().admit(PersistentVolumeClaimAdmission),
		kind(apps, "deployments", "Deployment", true, &appsv1.Deployment{}, &appsv1.DeploymentList{}, strategy.Deployment, printers.Deployments).
			short("deploy").inAll().status().scale(strategy.DeploymentReplicas, strategy.SetDeploymentReplicas),
		kind(apps, "replicasets", "ReplicaSet", true, &appsv1.ReplicaSet{}, &appsv1.ReplicaSetList{}, strategy.ReplicaSet, printers.ReplicaSets).
			short("rs").inAll().status().scale(strategy.ReplicaSetReplicas, strategy.SetReplicaSetReplicas).fields(strategy.ReplicaSetFields),
		kind(apps, "daemonsets", "DaemonSet", true, &appsv1.DaemonSet{}, &appsv1.DaemonSetList{}, strategy.DaemonSet, printers.DaemonSets).
			short("ds").inAll().status(),
		kind(apps, "statefulsets", "StatefulSet", true, &appsv1.StatefulSet{}, &appsv1.StatefulSetList{}, strategy.StatefulSet, printers.StatefulSets).
			short("sts").inAll().status().scale(strategy.StatefulSetReplicas, strategy.SetStatefulSetReplicas),
		kind(apps, "controllerrevisions", "ControllerRevision", true, &appsv1.ControllerRevision{}, &appsv1.ControllerRevisionList{},
			strategy.ControllerRevision, printers.ControllerRevisions),
		kind(schedulingv1.SchemeGroupVersion, "priorityclasses", "PriorityClass", false, &schedulingv1.PriorityClass{}, &schedulingv1.PriorityClassList{},
			strategy.PriorityClass, printers.PriorityClasses).short("pc").admit(PriorityClassAdmission),
		kind(policyv1.SchemeGroupVersion, "poddisruptionbudgets", "PodDisruptionBudget", true, &policyv1.PodDisruptionBudget{},
			&policyv1.PodDisruptionBudgetList{}, strategy.PodDisruptionBudget, printers.PodDisruptionBudgets).short("pdb").status(),
		kind(batch, "cronjobs", "CronJob", true, &batchv1.CronJob{}, &batchv1.CronJobList{}, strategy.CronJob, printers.CronJobs).
			short("cj").inAll().status(),
		kind(batch, "jobs", "Job", true, &batchv1.Job{}, &batchv1.JobList{}, strategy.Job, printers.Jobs).
			inAll().status().fields(strategy.JobFields),
		kind(discoveryv1.SchemeGroupVersion, "endpointslices", "EndpointSlice", true, &discoveryv1.EndpointSlice{}, &discoveryv1.EndpointSliceList{}, strategy.EndpointSlice, printers.EndpointSlices),
		kind(networkingv1.SchemeGroupVersion, "ingresses", "Ingress", true, &networkingv1.Ingress{}, &networkingv1.IngressList{}, strategy.Ingress, printers.Ingresses).
			short("ing").status().admit(IngressAdmission),
		kind(networkingv1.SchemeGroupVersion, "networkpolicies", "NetworkPolicy", true, &networkingv1.NetworkPolicy{}, &networkingv1.NetworkPolicyList{},
			strategy.NetworkPolicy, printers.NetworkPolicies).short("netpol"),
		kind(networkingv1.SchemeGroupVersion, "ingressclasses", "IngressClass", false, &networkingv1.IngressClass{}, &networkingv1.IngressClassList{}, strategy.IngressClass, printers.IngressClasses),
		kind(autoscalingv2.SchemeGroupVersion, "horizontalpodautoscalers", "HorizontalPodAutoscaler", true, &autoscalingv2.HorizontalPodAutoscaler{}, &autoscalingv2.HorizontalPodAutoscalerList{}, strategy.HorizontalPodAutoscaler, printers.HorizontalPodAutoscalers).
			short("hpa").inAll().status().convert(strategy.ConvertHorizontalPodAutoscaler),
		kind(autoscalingv1.SchemeGroupVersion, "horizontalpodautoscalers", "HorizontalPodAutoscaler", true, &autoscalingv1.HorizontalPodAutoscaler{}, &autoscalingv1.HorizontalPodAutoscalerList{}, strategy.HorizontalPodAutoscalerV1, printers.HorizontalPodAutoscalers).
			short("hpa").inAll().status().storedAs("v2").convert(strategy.ConvertHorizontalPodAutoscaler),
		kind(storagev1.SchemeGroupVersion, "storageclasses", "StorageClass", false, &storagev1.StorageClass{}, &storagev1.StorageClassList{}, strategy.StorageClass, printers.StorageClasses).
			short("sc"),
		kind(coordinationv1.SchemeGroupVersion, "leases", "Lease", true, &coordinationv1.Lease{}, &coordinationv1.LeaseList{}, strategy.Lease, printers.Leases),
		kind(nodev1.SchemeGroupVersion, "runtimeclasses", "RuntimeClass", false, &nodev1.RuntimeClass{}, &nodev1.RuntimeClassList{}, strategy.RuntimeClass, printers.RuntimeClasses),
		kind(rbac, "roles", "Role", true, &rbacv1.Role{}, &rbacv1.RoleList{}, strategy.Role, printers.Roles),
		kind(rbac, "rolebindings", "RoleBinding", true, &rbacv1.RoleBinding{}, &rbacv1.RoleBindingList{}, strategy.RoleBinding, printers.RoleBindings),
		kind(rbac, "clusterroles", "ClusterRole", false, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleList{}, strategy.ClusterRole, printers.ClusterRoles),
		kind(rbac, "clusterrolebindings", "ClusterRoleBinding", false, &rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRoleBindingList{}, strategy.ClusterRoleBinding, printers.ClusterRoleBindings),
		kind(certificatesv1.SchemeGroupVersion, "certificatesigningrequests", "CertificateSigningRequest", false, &certificatesv1.CertificateSigningRequest{},
			&certificatesv1.CertificateSigningRequestList{}, strategy.CertificateSigningRequest, printers.CertificateSigningRequests).
			short("csr").status().approval(strategy.PrepareForApprovalUpdate).fields(strategy.CSRFields),
		kind(admissionregistrationv1.SchemeGroupVersion, "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", false,
			&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.MutatingWebhookConfigurationList{},
			strategy.MutatingWebhookConfiguration, printers.MutatingWebhookConfigurations).
			categories("api-extensions").warn(matchConditionsWarning),
		kind(admissionregistrationv1.SchemeGroupVersion, "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", false,
			&admissionregistrationv1.ValidatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfigurationList{},
			strategy.ValidatingWebhookConfiguration, printers.ValidatingWebhookConfigurations).
			categories("api-extensions").warn(matchConditionsWarning),
	}
}

// matchConditionsWarning warns of a webhook's matchConditions: CEL, which
// isle does not evaluate, so that such a webhook is treated as one whose
// conditions fail to evaluate (its failurePolicy decides).
func matchConditionsWarning(obj runtime.Object) []string {
	var names []string
	switch c := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for _, w := range c.Webhooks {
			if len(w.MatchConditions) > 0 {
				names = append(names, w.Name)
			}
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for _, w := range c.Webhooks {
			if len(w.MatchConditions) > 0 {
				names = append(names, w.Name)
			}
		}
	}
	var out []string
	for _, n := range names {
		out = append(out, "webhook "+n+": matchConditions are CEL, which isle does not evaluate: its failurePolicy decides every request it matches (Fail refuses them, Ignore skips the webhook)")
	}
	return out
}

// kind starts the entry of a kind served as a Go type: obj and list are
// its empty object and list, the singular name its kind in lower case.
func kind(gv schema.GroupVersion, resource, kind string, namespaced bool, obj, list runtime.Object, s Strategy, t TableConvertor) *Resource {
	return &Resource{
		GroupVersionResource: gv.WithResource(resource),
		Kind:                 kind, Singular: strings.ToLower(kind), Namespaced: namespaced,
		New:      func() runtime.Object { return obj.DeepCopyObject() },
		NewList:  func() runtime.Object { return list.DeepCopyObject() },
		Strategy: s, Table: t,
	}
}

func (r *Resource) short(names ...string) *Resource  { r.ShortNames = names; return r }
func (r *Resource) inAll() *Resource                 { r.Categories = []string{"all"}; return r }
func (r *Resource) categories(c ...string) *Resource { r.Categories = c; return r }
func (r *Resource) warn(f func(runtime.Object) []string) *Resource {
	r.Warnings = f
	return r
}
func (r *Resource) status() *Resource              { r.Status = true; return r }
func (r *Resource) extra(subs ...string) *Resource { r.Extra = subs; return r }
func (r *Resource) approval(f func(obj, old runtime.Object)) *Resource {
	r.Approval = f
	return r
}
func (r *Resource) admit(a *Admission) *Resource { r.Admission = a; return r }
func (r *Resource) fields(f map[string]func(runtime.Object) string) *Resource {
	r.Fields = f
	return r
}

func (r *Resource) scale(get func(runtime.Object) (int32, int32, *metav1.LabelSelector), set func(runtime.Object, int32)) *Resource {
	r.Scale = &Scale{Replicas: get, SetReplicas: set}
	return r
}

func (r *Resource) storedAs(version string) *Resource { r.StorageVersion = version; return r }

// storedIn stores the objects as those of another group's version.
func (r *Resource) storedIn(gv schema.GroupVersion) *Resource {
	r.StorageGroup, r.StorageVersion = cmp.Or(gv.Group, "core"), gv.Version
	return r
}
func (r *Resource) convert(fn func(runtime.Object, schema.GroupVersion) (runtime.Object, error)) *Resource {
	r.Convert = fn
	return r
}
