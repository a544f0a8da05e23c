package printers

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// now is the clock of every test.
var now = time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)

// ago is a timestamp d before now.
func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

// agoPtr is ago as a pointer, for deletion timestamps and the like.
func agoPtr(d time.Duration) *metav1.Time { t := ago(d); return &t }

func ptr[T any](v T) *T { return &v }

// meta is the metadata of an object created d ago.
func meta(name string, d time.Duration) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: ago(d)}
}

// rowOf prints obj, which must give exactly one row.
func rowOf(t *testing.T, obj runtime.Object) metav1.TableRow {
	t.Helper()
	rows, err := Rows(obj, now)
	if err != nil {
		t.Fatalf("Rows(%T): %v", obj, err)
	}
	if len(rows) != 1 {
		t.Fatalf("Rows(%T) gave %d rows, want 1", obj, len(rows))
	}
	return rows[0]
}

// checkCells compares the cells of obj's row with want, cell by cell, so a
// failure names the column.
func checkCells(t *testing.T, gr schema.GroupResource, obj runtime.Object, want []interface{}) {
	t.Helper()
	got := rowOf(t, obj).Cells
	cols, ok := Columns(gr)
	if !ok {
		t.Fatalf("Columns(%v): unknown", gr)
	}
	if len(want) != len(cols) {
		t.Fatalf("test wants %d cells, %v has %d columns", len(want), gr, len(cols))
	}
	if len(got) != len(want) {
		t.Fatalf("got %d cells %q, want %d %q", len(got), got, len(want), want)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("column %q: got %#v, want %#v", cols[i].Name, got[i], want[i])
		}
	}
}

// fixture is, for one resource, two realistic objects and their list.
type fixture struct {
	resource schema.GroupResource
	items    []runtime.Object
	list     runtime.Object
}

// fixtures has an entry for every resource of the API spec.
func fixtures() []fixture {
	pod1, pod2 := runningPod(), crashLoopPod()
	svc1, svc2 := nodePortService(), pendingLoadBalancer()
	dep1 := deployment()
	dep2 := deployment()
	dep2.Name, dep2.Status.ReadyReplicas = "api", 1
	rs := replicaSet()
	ds := daemonSet()
	job1, job2 := completeJob(), runningJob()
	hpa1, hpa2, hpa3 := hpaWithMetrics(), hpaWithoutMetrics(), hpaAverageValue()
	hpaV1 := hpaV1()
	node1, node2 := readyNode(), cordonedNode()
	ing1, ing2 := tlsIngress(), plainIngress()
	slice := endpointSlice()
	ev1, ev2 := classicEvent(), newAPIEvent()
	pv, pvc := boundPV(), boundPVC()
	sc := defaultStorageClass()
	lease := lease()
	ns := corev1.Namespace{ObjectMeta: meta("kube-system", 30*24*time.Hour), Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	cm := corev1.ConfigMap{ObjectMeta: meta("kube-root-ca.crt", 2*time.Hour), Data: map[string]string{"ca.crt": "…"}}
	secret := corev1.Secret{ObjectMeta: meta("tls", time.Hour), Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": nil, "tls.key": nil}}
	sa := corev1.ServiceAccount{ObjectMeta: meta("default", 3*24*time.Hour)}
	ep := endpoints()
	ic := ingressClass()
	role := rbacv1.Role{ObjectMeta: meta("pod-reader", time.Hour), Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
	clusterRole := rbacv1.ClusterRole{ObjectMeta: meta("view", 30*24*time.Hour)}
	subjects := []rbacv1.Subject{{Kind: "User", Name: "jane"}, {Kind: "Group", Name: "students"}, {Kind: "ServiceAccount", Name: "robot", Namespace: "lab"}}
	binding := rbacv1.RoleBinding{ObjectMeta: meta("read-pods", time.Hour), RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "pod-reader"}, Subjects: subjects}
	clusterBinding := rbacv1.ClusterRoleBinding{ObjectMeta: meta("view-all", time.Hour), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, Subjects: subjects}

	return []fixture{
		{gr("", "namespaces"), []runtime.Object{&ns, ns.DeepCopy()}, &corev1.NamespaceList{Items: []corev1.Namespace{ns, ns}}},
		{gr("", "nodes"), []runtime.Object{&node1, &node2}, &corev1.NodeList{Items: []corev1.Node{node1, node2}}},
		{gr("", "pods"), []runtime.Object{&pod1, &pod2}, &corev1.PodList{Items: []corev1.Pod{pod1, pod2}}},
		{gr("", "services"), []runtime.Object{&svc1, &svc2}, &corev1.ServiceList{Items: []corev1.Service{svc1, svc2}}},
		{gr("", "configmaps"), []runtime.Object{&cm}, &corev1.ConfigMapList{Items: []corev1.ConfigMap{cm}}},
		{gr("", "secrets"), []runtime.Object{&secret}, &corev1.SecretList{Items: []corev1.Secret{secret}}},
		{gr("", "serviceaccounts"), []runtime.Object{&sa}, &corev1.ServiceAccountList{Items: []corev1.ServiceAccount{sa}}},
		{gr("", "events"), []runtime.Object{&ev1, &ev2}, &corev1.EventList{Items: []corev1.Event{ev1, ev2}}},
		{gr("", "persistentvolumes"), []runtime.Object{&pv}, &corev1.PersistentVolumeList{Items: []corev1.PersistentVolume{pv}}},
		{gr("", "persistentvolumeclaims"), []runtime.Object{&pvc}, &corev1.PersistentVolumeClaimList{Items: []corev1.PersistentVolumeClaim{pvc}}},
		{gr("", "endpoints"), []runtime.Object{&ep}, &corev1.EndpointsList{Items: []corev1.Endpoints{ep}}},
		{gr("apps", "deployments"), []runtime.Object{&dep1, &dep2}, &appsv1.DeploymentList{Items: []appsv1.Deployment{dep1, dep2}}},
		{gr("apps", "replicasets"), []runtime.Object{&rs}, &appsv1.ReplicaSetList{Items: []appsv1.ReplicaSet{rs}}},
		{gr("apps", "daemonsets"), []runtime.Object{&ds}, &appsv1.DaemonSetList{Items: []appsv1.DaemonSet{ds}}},
		{gr("batch", "jobs"), []runtime.Object{&job1, &job2}, &batchv1.JobList{Items: []batchv1.Job{job1, job2}}},
		{gr("discovery.k8s.io", "endpointslices"), []runtime.Object{&slice}, &discoveryv1.EndpointSliceList{Items: []discoveryv1.EndpointSlice{slice}}},
		{gr("networking.k8s.io", "ingresses"), []runtime.Object{&ing1, &ing2}, &networkingv1.IngressList{Items: []networkingv1.Ingress{ing1, ing2}}},
		{gr("networking.k8s.io", "ingressclasses"), []runtime.Object{&ic}, &networkingv1.IngressClassList{Items: []networkingv1.IngressClass{ic}}},
		{gr("autoscaling", "horizontalpodautoscalers"), []runtime.Object{&hpa1, &hpa2, &hpa3}, &autoscalingv2.HorizontalPodAutoscalerList{Items: []autoscalingv2.HorizontalPodAutoscaler{hpa1, hpa2, hpa3}}},
		{gr("autoscaling", "horizontalpodautoscalers"), []runtime.Object{&hpaV1}, &autoscalingv1.HorizontalPodAutoscalerList{Items: []autoscalingv1.HorizontalPodAutoscaler{hpaV1}}},
		{gr("storage.k8s.io", "storageclasses"), []runtime.Object{&sc}, &storagev1.StorageClassList{Items: []storagev1.StorageClass{sc}}},
		{gr("coordination.k8s.io", "leases"), []runtime.Object{&lease}, &coordinationv1.LeaseList{Items: []coordinationv1.Lease{lease}}},
		{gr("rbac.authorization.k8s.io", "roles"), []runtime.Object{&role}, &rbacv1.RoleList{Items: []rbacv1.Role{role}}},
		{gr("rbac.authorization.k8s.io", "clusterroles"), []runtime.Object{&clusterRole}, &rbacv1.ClusterRoleList{Items: []rbacv1.ClusterRole{clusterRole}}},
		{gr("rbac.authorization.k8s.io", "rolebindings"), []runtime.Object{&binding}, &rbacv1.RoleBindingList{Items: []rbacv1.RoleBinding{binding}}},
		{gr("rbac.authorization.k8s.io", "clusterrolebindings"), []runtime.Object{&clusterBinding}, &rbacv1.ClusterRoleBindingList{Items: []rbacv1.ClusterRoleBinding{clusterBinding}}},
	}
}

// Shared sample objects; each resource's test file adds its own cases.

func runningPod() corev1.Pod {
	return corev1.Pod{
		ObjectMeta: meta("web-7d4b9c6f5-x2x9q", 5*time.Minute),
		Spec: corev1.PodSpec{
			NodeName:   "pi-1",
			Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}, {Name: "sidecar", Image: "envoy:1.31"}},
		},
		Status: corev1.PodStatus{
			Phase:  corev1.PodRunning,
			PodIP:  "10.244.1.5",
			PodIPs: []corev1.PodIP{{IP: "10.244.1.5"}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "web", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(5 * time.Minute)}}},
				{Name: "sidecar", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(5 * time.Minute)}}},
			},
		},
	}
}

func crashLoopPod() corev1.Pod {
	return corev1.Pod{
		ObjectMeta: meta("api-6b8f9d7c4-kq2lm", time.Hour),
		Spec: corev1.PodSpec{
			NodeName:   "pi-2",
			Containers: []corev1.Container{{Name: "api", Image: "ghcr.io/example/api:2.1"}},
		},
		Status: corev1.PodStatus{
			Phase:  corev1.PodRunning,
			PodIPs: []corev1.PodIP{{IP: "10.244.2.9"}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"},
			},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name:                 "api",
				RestartCount:         5,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 2m40s restarting failed container"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: ago(2 * time.Minute)}},
			}},
		},
	}
}

func nodePortService() corev1.Service {
	return corev1.Service{
		ObjectMeta: meta("web", 2*24*time.Hour),
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeNodePort,
			ClusterIP:  "10.96.12.34",
			ClusterIPs: []string{"10.96.12.34"},
			Selector:   map[string]string{"app": "web"},
			Ports:      []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}},
		},
	}
}

func pendingLoadBalancer() corev1.Service {
	return corev1.Service{
		ObjectMeta: meta("ingress-nginx-controller", 10*time.Minute),
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeLoadBalancer,
			ClusterIPs: []string{"10.96.200.10"},
			Selector:   map[string]string{"app.kubernetes.io/name": "ingress-nginx", "app.kubernetes.io/component": "controller"},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, NodePort: 31080, Protocol: corev1.ProtocolTCP},
				{Name: "https", Port: 443, NodePort: 31443, Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

func deployment() appsv1.Deployment {
	return appsv1.Deployment{
		ObjectMeta: meta("web", 3*24*time.Hour),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "web", Image: "nginx:1.27"}, {Name: "exporter", Image: "nginx/nginx-prometheus-exporter:1.3"},
			}}},
		},
		Status: appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3},
	}
}

func replicaSet() appsv1.ReplicaSet {
	return appsv1.ReplicaSet{
		ObjectMeta: meta("web-7d4b9c6f5", 3*24*time.Hour),
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "pod-template-hash": "7d4b9c6f5"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}},
		},
		Status: appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 2},
	}
}

func daemonSet() appsv1.DaemonSet {
	return appsv1.DaemonSet{
		ObjectMeta: meta("kube-proxy", 40*24*time.Hour),
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-proxy"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
				Containers:   []corev1.Container{{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.32.0"}},
			}},
		},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 3, NumberAvailable: 2},
	}
}

func completeJob() batchv1.Job {
	return batchv1.Job{
		ObjectMeta: meta("pi", 10*time.Minute),
		Spec: batchv1.JobSpec{
			Completions: ptr(int32(1)),
			Parallelism: ptr(int32(1)),
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "5f1c"}},
			Template:    corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pi", Image: "perl:5.34.0"}}}},
		},
		Status: batchv1.JobStatus{
			Succeeded:      1,
			StartTime:      agoPtr(10 * time.Minute),
			CompletionTime: agoPtr(10*time.Minute - 12*time.Second),
			Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue},
			},
		},
	}
}

func runningJob() batchv1.Job {
	return batchv1.Job{
		ObjectMeta: meta("queue-worker", 3*time.Minute),
		Spec: batchv1.JobSpec{
			Parallelism: ptr(int32(3)),
			Template:    corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "busybox:1.36"}}}},
		},
		Status: batchv1.JobStatus{Active: 3, StartTime: agoPtr(3 * time.Minute)},
	}
}

func hpaWithMetrics() autoscalingv2.HorizontalPodAutoscaler {
	return autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: meta("web", 2*time.Hour),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "web", APIVersion: "apps/v1"},
			MinReplicas:    ptr(int32(1)),
			MaxReplicas:    10,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(int32(80))}},
			}},
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			CurrentReplicas: 2,
			DesiredReplicas: 2,
			CurrentMetrics: []autoscalingv2.MetricStatus{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
					Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr(int32(50)), AverageValue: resource.NewMilliQuantity(125, resource.DecimalSI)}},
			}},
		},
	}
}

func hpaWithoutMetrics() autoscalingv2.HorizontalPodAutoscaler {
	h := hpaWithMetrics()
	h.Name = "api"
	h.CreationTimestamp = ago(20 * time.Second)
	h.Status = autoscalingv2.HorizontalPodAutoscalerStatus{}
	return h
}

// hpaAverageValue has quantities built in code, which cache their string
// form on first use: printing must not write that cache into the object.
func hpaAverageValue() autoscalingv2.HorizontalPodAutoscaler {
	h := hpaWithMetrics()
	h.Name = "cache"
	h.Spec.Metrics = []autoscalingv2.MetricSpec{{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(256<<20, resource.BinarySI)}},
	}}
	h.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceMemory,
			Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewQuantity(100<<20, resource.BinarySI)}},
	}}
	return h
}

func hpaV1() autoscalingv1.HorizontalPodAutoscaler {
	return autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: meta("legacy", 4*24*time.Hour),
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef:                 autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "legacy", APIVersion: "apps/v1"},
			MinReplicas:                    ptr(int32(2)),
			MaxReplicas:                    5,
			TargetCPUUtilizationPercentage: ptr(int32(70)),
		},
		Status: autoscalingv1.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, CurrentCPUUtilizationPercentage: ptr(int32(35))},
	}
}

func readyNode() corev1.Node {
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:              "pi-1",
			CreationTimestamp: ago(90 * 24 * time.Hour),
			Labels:            map[string]string{"node-role.kubernetes.io/control-plane": "", "kubernetes.io/hostname": "pi-1"},
		},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeHostName, Address: "pi-1"},
				{Type: corev1.NodeInternalIP, Address: "192.168.1.21"},
			},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion:          "v1.32.0",
				OSImage:                 "Debian GNU/Linux 12 (bookworm)",
				KernelVersion:           "6.6.51+rpt-rpi-v8",
				ContainerRuntimeVersion: "isle://0.1.0",
			},
		},
	}
}

func cordonedNode() corev1.Node {
	n := readyNode()
	n.Name = "pi-2"
	n.Labels = nil
	n.Spec.Unschedulable = true
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown"}}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.22"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.7"}}
	return n
}

func tlsIngress() networkingv1.Ingress {
	return networkingv1.Ingress{
		ObjectMeta: meta("shop", 6*time.Hour),
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr("nginx"),
			TLS:              []networkingv1.IngressTLS{{Hosts: []string{"shop.example.com"}, SecretName: "shop-tls"}},
			Rules:            []networkingv1.IngressRule{{Host: "shop.example.com"}, {Host: "www.shop.example.com"}},
		},
		Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{
			Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "192.168.1.240"}},
		}},
	}
}

func plainIngress() networkingv1.Ingress {
	return networkingv1.Ingress{
		ObjectMeta: meta("catch-all", 45*time.Second),
		Spec:       networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web"}}},
	}
}

func ingressClass() networkingv1.IngressClass {
	return networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx", CreationTimestamp: ago(7 * 24 * time.Hour)},
		Spec: networkingv1.IngressClassSpec{
			Controller: "k8s.io/ingress-nginx",
			Parameters: &networkingv1.IngressClassParametersReference{APIGroup: ptr("k8s.example.com"), Kind: "IngressParameters", Name: "external-lb"},
		},
	}
}

func endpointSlice() discoveryv1.EndpointSlice {
	return discoveryv1.EndpointSlice{
		ObjectMeta:  meta("web-abc12", 2*24*time.Hour),
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.1.5"}},
			{Addresses: []string{"10.244.2.7"}},
		},
	}
}

func endpoints() corev1.Endpoints {
	return corev1.Endpoints{
		ObjectMeta: meta("web", 2*24*time.Hour),
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.244.1.5"}, {IP: "10.244.2.7"}},
			Ports:     []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}},
		}},
	}
}

func classicEvent() corev1.Event {
	return corev1.Event{
		ObjectMeta:     meta("api-6b8f9d7c4-kq2lm.17c8f1b2a3", time.Hour),
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "api-6b8f9d7c4-kq2lm", FieldPath: "spec.containers{api}"},
		Reason:         "BackOff",
		Message:        "Back-off restarting failed container api in pod api-6b8f9d7c4-kq2lm_default\n",
		Source:         corev1.EventSource{Component: "kubelet", Host: "pi-2"},
		FirstTimestamp: ago(58 * time.Minute),
		LastTimestamp:  ago(2 * time.Minute),
		Count:          212,
		Type:           corev1.EventTypeWarning,
	}
}

func newAPIEvent() corev1.Event {
	return corev1.Event{
		ObjectMeta:          meta("web-7d4b9c6f5-x2x9q.17c8f1b2b4", 5*time.Minute),
		InvolvedObject:      corev1.ObjectReference{Kind: "Pod", Name: "web-7d4b9c6f5-x2x9q"},
		Reason:              "Scheduled",
		Message:             "Successfully assigned default/web-7d4b9c6f5-x2x9q to pi-1",
		EventTime:           metav1.NewMicroTime(now.Add(-5 * time.Minute)),
		ReportingController: "default-scheduler",
		Type:                corev1.EventTypeNormal,
	}
}

func boundPV() corev1.PersistentVolume {
	return corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-3f2a", CreationTimestamp: ago(5 * 24 * time.Hour)},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(8*1024*1024*1024, resource.BinarySI)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			ClaimRef:                      &corev1.ObjectReference{Namespace: "default", Name: "data-db-0"},
			StorageClassName:              "local-path",
			VolumeMode:                    ptr(corev1.PersistentVolumeFilesystem),
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
}

func boundPVC() corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{
		ObjectMeta: meta("data-db-0", 5*24*time.Hour),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}},
			VolumeName:       "pvc-3f2a",
			StorageClassName: ptr("local-path"),
			VolumeMode:       ptr(corev1.PersistentVolumeFilesystem),
		},
		Status: corev1.PersistentVolumeClaimStatus{
			Phase:       corev1.ClaimBound,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(8*1024*1024*1024, resource.BinarySI)},
		},
	}
}

func defaultStorageClass() storagev1.StorageClass {
	return storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:              "local-path",
			CreationTimestamp: ago(90 * 24 * time.Hour),
			Annotations:       map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       "isle.dev/local-path",
		ReclaimPolicy:     ptr(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr(storagev1.VolumeBindingWaitForFirstConsumer),
	}
}

func lease() coordinationv1.Lease {
	return coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-1", Namespace: "kube-node-lease", CreationTimestamp: ago(90 * 24 * time.Hour)},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr("pi-1"), LeaseDurationSeconds: ptr(int32(40))},
	}
}
