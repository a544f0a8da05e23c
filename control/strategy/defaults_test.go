package strategy

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	appsv1beta2 "k8s.io/api/apps/v1beta2"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The templates' pod spec defaults, as a Deployment's stored template has
// them.
const templateSpec = `{
  "containers": [{"name": "app", "image": "busybox", "imagePullPolicy": "Always", "resources": {},
    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
  "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
  "securityContext": {}, "terminationGracePeriodSeconds": 30}`

const templateManifest = `{"metadata": {"labels": {"app": "x"}},
  "spec": {"containers": [{"name": "app", "image": "busybox"}]}}`

// TestDefault defaults minimal manifests and compares the result with what
// a Kubernetes API server stores for them (less what other components add:
// cluster IPs, node ports, the service account token volume, status).
func TestDefault(t *testing.T) {
	tests := []struct {
		name     string
		obj      runtime.Object
		manifest string
		want     string
	}{
		{
			name:     "pod minimal",
			obj:      &corev1.Pod{},
			manifest: `{"metadata": {"name": "nginx"}, "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}`,
			want: `{"metadata": {"name": "nginx"}, "status": {},
			  "spec": {
			    "containers": [{"name": "nginx", "image": "nginx", "imagePullPolicy": "Always", "resources": {},
			      "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
			    "dnsPolicy": "ClusterFirst", "enableServiceLinks": true,
			    "restartPolicy": "Always", "schedulerName": "default-scheduler", "securityContext": {},
			    "serviceAccount": "default", "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
			    "tolerations": [
			      {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 30},
			      {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 30}]}}`,
		},
		{
			name: "pod with ports probes resources volumes",
			obj:  &corev1.Pod{},
			manifest: `{"metadata": {"name": "web"}, "spec": {
			  "restartPolicy": "OnFailure", "serviceAccountName": "builder", "priorityClassName": "system-node-critical",
			  "tolerations": [{"operator": "Exists"}],
			  "initContainers": [{"name": "init", "image": "busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			    "resources": {"limits": {"memory": "64Mi"}}}],
			  "containers": [{"name": "web", "image": "registry.local:5000/web:1.2",
			    "ports": [{"containerPort": 8080}, {"containerPort": 53, "protocol": "UDP"}],
			    "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
			    "resources": {"limits": {"cpu": "0.5", "memory": "128Mi"}, "requests": {"cpu": "100m"}},
			    "livenessProbe": {"httpGet": {"port": 8080}},
			    "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 5},
			    "startupProbe": {"grpc": {"port": 9000}},
			    "lifecycle": {"preStop": {"httpGet": {"port": 8080, "path": "/quit"}}}}],
			  "volumes": [{"name": "tmp"}, {"name": "cfg", "configMap": {"name": "cfg"}}, {"name": "sec", "secret": {"secretName": "sec"}},
			    {"name": "host", "hostPath": {"path": "/data"}}, {"name": "info", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
			    {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]}}`,
			want: `{"metadata": {"name": "web"}, "status": {},
			  "spec": {
			    "initContainers": [{"name": "init", "image": "busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			      "imagePullPolicy": "IfNotPresent", "resources": {"limits": {"memory": "64Mi"}, "requests": {"memory": "64Mi"}},
			      "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
			    "containers": [{"name": "web", "image": "registry.local:5000/web:1.2", "imagePullPolicy": "IfNotPresent",
			      "ports": [{"containerPort": 8080, "protocol": "TCP"}, {"containerPort": 53, "protocol": "UDP"}],
			      "env": [{"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
			      "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
			      "livenessProbe": {"httpGet": {"path": "/", "port": 8080, "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10,
			        "successThreshold": 1, "failureThreshold": 3},
			      "readinessProbe": {"tcpSocket": {"port": 8080}, "timeoutSeconds": 1, "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 3},
			      "startupProbe": {"grpc": {"port": 9000, "service": ""}, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
			      "lifecycle": {"preStop": {"httpGet": {"path": "/quit", "port": 8080, "scheme": "HTTP"}}},
			      "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
			    "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 420}},
			      {"name": "sec", "secret": {"secretName": "sec", "defaultMode": 420}}, {"name": "host", "hostPath": {"path": "/data", "type": ""}},
			      {"name": "info", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels"}}], "defaultMode": 420}},
			      {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}], "defaultMode": 420}}],
			    "dnsPolicy": "ClusterFirst", "enableServiceLinks": true,
			    "priorityClassName": "system-node-critical", "restartPolicy": "OnFailure",
			    "schedulerName": "default-scheduler", "securityContext": {},
			    "serviceAccount": "builder", "serviceAccountName": "builder", "terminationGracePeriodSeconds": 30,
			    "tolerations": [{"operator": "Exists"}]}}`,
		},
		{
			name:     "pod host network ports",
			obj:      &corev1.Pod{},
			manifest: `{"metadata": {"name": "h"}, "spec": {"hostNetwork": true, "dnsPolicy": "ClusterFirstWithHostNet", "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}], "containers": [{"name": "c", "image": "c:latest", "ports": [{"containerPort": 9100}]}]}}`,
			want: `{"metadata": {"name": "h"}, "status": {},
			  "spec": {"hostNetwork": true,
			    "containers": [{"name": "c", "image": "c:latest", "imagePullPolicy": "Always", "resources": {},
			      "ports": [{"containerPort": 9100, "hostPort": 9100, "protocol": "TCP"}],
			      "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
			    "dnsPolicy": "ClusterFirstWithHostNet", "enableServiceLinks": true,
			    "restartPolicy": "Always", "schedulerName": "default-scheduler", "securityContext": {},
			    "serviceAccount": "default", "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
			    "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"},
			      {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 30}]}}`,
		},
		{
			name:     "deployment minimal",
			obj:      &appsv1.Deployment{},
			manifest: `{"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": ` + templateManifest + `}}`,
			want: `{"metadata": {"name": "d"}, "status": {},
			  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}},
			    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
			    "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
			    "template": {"metadata": {"labels": {"app": "x"}}, "spec": ` + templateSpec + `}}}`,
		},
		{
			name:     "deployment recreate",
			obj:      &appsv1.Deployment{},
			manifest: `{"metadata": {"name": "d"}, "spec": {"replicas": 0, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": {"app": "x"}}, "template": ` + templateManifest + `}}`,
			want: `{"metadata": {"name": "d"}, "status": {},
			  "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "x"}}, "strategy": {"type": "Recreate"},
			    "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
			    "template": {"metadata": {"labels": {"app": "x"}}, "spec": ` + templateSpec + `}}}`,
		},
		{
			name:     "replicaset minimal",
			obj:      &appsv1.ReplicaSet{},
			manifest: `{"metadata": {"name": "r"}, "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": ` + templateManifest + `}}`,
			want: `{"metadata": {"name": "r"}, "status": {"replicas": 0},
			  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}},
			    "template": {"metadata": {"labels": {"app": "x"}}, "spec": ` + templateSpec + `}}}`,
		},
		{
			name:     "daemonset minimal",
			obj:      &appsv1.DaemonSet{},
			manifest: `{"metadata": {"name": "ds"}, "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": ` + templateManifest + `}}`,
			want: `{"metadata": {"name": "ds"},
			  "status": {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0},
			  "spec": {"selector": {"matchLabels": {"app": "x"}}, "revisionHistoryLimit": 10,
			    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
			    "template": {"metadata": {"labels": {"app": "x"}}, "spec": ` + templateSpec + `}}}`,
		},
		{
			name:     "job minimal keeps restart policy",
			obj:      &batchv1.Job{},
			manifest: `{"metadata": {"name": "pi"}, "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "app", "image": "busybox"}]}}}}`,
			want: `{"metadata": {"name": "pi"}, "status": {},
			  "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 6, "completionMode": "NonIndexed", "suspend": false,
			    "manualSelector": false, "podReplacementPolicy": "TerminatingOrFailed",
			    "template": {"metadata": {}, "spec": {
			      "containers": [{"name": "app", "image": "busybox", "imagePullPolicy": "Always", "resources": {},
			        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
			      "dnsPolicy": "ClusterFirst", "restartPolicy": "Never", "schedulerName": "default-scheduler",
			      "securityContext": {}, "terminationGracePeriodSeconds": 30}}}}`,
		},
		{
			name:     "job parallel with pod failure policy",
			obj:      &batchv1.Job{},
			manifest: `{"metadata": {"name": "p"}, "spec": {"parallelism": 3, "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}, "template": {"metadata": {"labels": {"app": "p"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "app", "image": "busybox:1"}]}}}}`,
			want: `{"metadata": {"name": "p", "labels": {"app": "p"}}, "status": {},
			  "spec": {"parallelism": 3, "backoffLimit": 6, "completionMode": "NonIndexed", "suspend": false,
			    "manualSelector": false, "podReplacementPolicy": "Failed",
			    "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
			    "template": {"metadata": {"labels": {"app": "p"}}, "spec": {
			      "containers": [{"name": "app", "image": "busybox:1", "imagePullPolicy": "IfNotPresent", "resources": {},
			        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
			      "dnsPolicy": "ClusterFirst", "restartPolicy": "Never", "schedulerName": "default-scheduler",
			      "securityContext": {}, "terminationGracePeriodSeconds": 30}}}}`,
		},
		{
			name:     "service cluster ip",
			obj:      &corev1.Service{},
			manifest: `{"metadata": {"name": "s"}, "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}, {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": "dns"}]}}`,
			want: `{"metadata": {"name": "s"}, "status": {"loadBalancer": {}},
			  "spec": {"selector": {"app": "x"}, "type": "ClusterIP", "sessionAffinity": "None",
			    "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}, {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": "dns"}],
			    "internalTrafficPolicy": "Cluster", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"}}`,
		},
		{
			name:     "service node port",
			obj:      &corev1.Service{},
			manifest: `{"metadata": {"name": "s"}, "spec": {"type": "NodePort", "selector": {"app": "x"}, "ports": [{"port": 80, "targetPort": 8080, "nodePort": 30080}]}}`,
			want: `{"metadata": {"name": "s"}, "status": {"loadBalancer": {}},
			  "spec": {"selector": {"app": "x"}, "type": "NodePort", "sessionAffinity": "None", "externalTrafficPolicy": "Cluster",
			    "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080, "nodePort": 30080}],
			    "internalTrafficPolicy": "Cluster", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"}}`,
		},
		{
			name:     "service load balancer with client ip affinity",
			obj:      &corev1.Service{},
			manifest: `{"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP", "selector": {"app": "x"}, "ports": [{"port": 443}]}}`,
			want: `{"metadata": {"name": "s"}, "status": {"loadBalancer": {}},
			  "spec": {"selector": {"app": "x"}, "type": "LoadBalancer", "sessionAffinity": "ClientIP",
			    "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}}, "externalTrafficPolicy": "Cluster",
			    "allocateLoadBalancerNodePorts": true, "ports": [{"port": 443, "protocol": "TCP", "targetPort": 443}],
			    "internalTrafficPolicy": "Cluster", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"}}`,
		},
		{
			name:     "service headless without selector",
			obj:      &corev1.Service{},
			manifest: `{"metadata": {"name": "s"}, "spec": {"clusterIP": "None", "ports": [{"port": 5432}]}}`,
			want: `{"metadata": {"name": "s"}, "status": {"loadBalancer": {}},
			  "spec": {"clusterIP": "None", "clusterIPs": ["None"], "type": "ClusterIP", "sessionAffinity": "None",
			    "ports": [{"port": 5432, "protocol": "TCP", "targetPort": 5432}],
			    "internalTrafficPolicy": "Cluster", "ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "RequireDualStack"}}`,
		},
		{
			name:     "service external name",
			obj:      &corev1.Service{},
			manifest: `{"metadata": {"name": "s"}, "spec": {"type": "ExternalName", "externalName": "db.example.com"}}`,
			want: `{"metadata": {"name": "s"}, "status": {"loadBalancer": {}},
			  "spec": {"type": "ExternalName", "externalName": "db.example.com", "sessionAffinity": "None"}}`,
		},
		{
			name:     "namespace",
			obj:      &corev1.Namespace{},
			manifest: `{"metadata": {"name": "team-a"}}`,
			want: `{"metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}},
			  "spec": {}, "status": {"phase": "Active"}}`,
		},
		{
			name:     "secret with string data",
			obj:      &corev1.Secret{},
			manifest: `{"metadata": {"name": "s"}, "data": {"a": "YQ=="}, "stringData": {"b": "bee"}}`,
			want:     `{"metadata": {"name": "s"}, "type": "Opaque", "data": {"a": "YQ==", "b": "YmVl"}}`,
		},
		{
			name:     "configmap unchanged",
			obj:      &corev1.ConfigMap{},
			manifest: `{"metadata": {"name": "c"}}`,
			want:     `{"metadata": {"name": "c"}}`,
		},
		{
			name:     "persistent volume claim",
			obj:      &corev1.PersistentVolumeClaim{},
			manifest: `{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}`,
			want: `{"metadata": {"name": "data"}, "status": {"phase": "Pending"},
			  "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"}}`,
		},
		{
			name:     "persistent volume",
			obj:      &corev1.PersistentVolume{},
			manifest: `{"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/srv/pv1"}}}`,
			want: `{"metadata": {"name": "pv1"}, "status": {"phase": "Pending"},
			  "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/srv/pv1", "type": ""},
			    "persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem"}}`,
		},
		{
			name:     "node allocatable from capacity",
			obj:      &corev1.Node{},
			manifest: `{"metadata": {"name": "pi-1"}, "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}`,
			want: `{"metadata": {"name": "pi-1"}, "spec": {},
			  "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}, "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
			    "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}}, "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "",
			    "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "", "kubeProxyVersion": "",
			    "operatingSystem": "", "architecture": ""}}}`,
		},
		{
			name:     "hpa v2 minimal",
			obj:      &autoscalingv2.HorizontalPodAutoscaler{},
			manifest: `{"metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 5}}`,
			want: `{"metadata": {"name": "h"}, "status": {"currentMetrics": null, "desiredReplicas": 0},
			  "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "minReplicas": 1, "maxReplicas": 5,
			    "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]}}`,
		},
		{
			name: "hpa v2 behavior completed",
			obj:  &autoscalingv2.HorizontalPodAutoscaler{},
			manifest: `{"metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
			  "metrics": [{"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}],
			  "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}}`,
			want: `{"metadata": {"name": "h"}, "status": {"currentMetrics": null, "desiredReplicas": 0},
			  "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 1, "maxReplicas": 5,
			    "metrics": [{"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}],
			    "behavior": {
			      "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
			        "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]},
			      "scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
			        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}}}`,
		},
		{
			name:     "hpa v1 keeps cpu target",
			obj:      &autoscalingv1.HorizontalPodAutoscaler{},
			manifest: `{"metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3}}`,
			want: `{"metadata": {"name": "h"}, "status": {"currentReplicas": 0, "desiredReplicas": 0},
			  "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 1, "maxReplicas": 3}}`,
		},
		{
			name:     "storage class",
			obj:      &storagev1.StorageClass{},
			manifest: `{"metadata": {"name": "local"}, "provisioner": "isle.dev/local"}`,
			want: `{"metadata": {"name": "local"}, "provisioner": "isle.dev/local",
			  "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}`,
		},
		{
			name:     "ingress class unchanged",
			obj:      &networkingv1.IngressClass{},
			manifest: `{"metadata": {"name": "isle"}, "spec": {"controller": "isle.dev/ingress"}}`,
			want:     `{"metadata": {"name": "isle"}, "spec": {"controller": "isle.dev/ingress"}}`,
		},
		{
			name:     "ingress class parameters scoped to cluster",
			obj:      &networkingv1.IngressClass{},
			manifest: `{"metadata": {"name": "isle"}, "spec": {"controller": "isle.dev/ingress", "parameters": {"kind": "Params", "name": "p"}}}`,
			want: `{"metadata": {"name": "isle"},
			  "spec": {"controller": "isle.dev/ingress", "parameters": {"kind": "Params", "name": "p", "scope": "Cluster"}}}`,
		},
		{
			name:     "endpoint slice ports",
			obj:      &discoveryv1.EndpointSlice{},
			manifest: `{"metadata": {"name": "e"}, "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.5"]}], "ports": [{"port": 80}]}`,
			want: `{"metadata": {"name": "e"}, "addressType": "IPv4",
			  "endpoints": [{"addresses": ["10.0.0.5"], "conditions": {}}], "ports": [{"name": "", "port": 80, "protocol": "TCP"}]}`,
		},
		{
			name:     "lease unchanged",
			obj:      &coordinationv1.Lease{},
			manifest: `{"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}}`,
			want:     `{"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}}`,
		},
		{
			name:     "service account unchanged",
			obj:      &corev1.ServiceAccount{},
			manifest: `{"metadata": {"name": "sa"}}`,
			want:     `{"metadata": {"name": "sa"}}`,
		},
		{
			name:     "event unchanged",
			obj:      &corev1.Event{},
			manifest: `{"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Started"}`,
			want: `{"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Started",
			  "source": {}, "firstTimestamp": null, "lastTimestamp": null, "eventTime": null, "reportingComponent": "", "reportingInstance": ""}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			decode(t, tt.manifest, tt.obj)
			Default(tt.obj)
			jsonEqual(t, tt.obj, tt.want)
		})
	}
}

// TestDefaultIdempotent: defaulting a defaulted object changes nothing.
func TestDefaultIdempotent(t *testing.T) {
	for _, obj := range []runtime.Object{validPod(), validDeployment(), validJob(), validService()} {
		again := obj.DeepCopyObject()
		Default(again)
		jsonEqual(t, again, mustJSON(t, obj))
	}
}

// TestDefaultJobSelectorOnCreate: ValidateCreate generates the selector
// and labels as Kubernetes' job strategy does, and the Job takes its
// template's labels.
func TestDefaultJobSelectorOnCreate(t *testing.T) {
	j := &batchv1.Job{}
	decode(t, `{"metadata": {"name": "pi", "namespace": "default", "uid": "u-1"}, "spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "pi", "image": "perl:5.34"}]}}}}`, j)
	Default(j)
	checkErrs(t, ValidateCreate(j))
	want := map[string]string{"batch.kubernetes.io/controller-uid": "u-1", "batch.kubernetes.io/job-name": "pi", "controller-uid": "u-1", "job-name": "pi"}
	jsonEqual(t, j.Spec.Template.Labels, mustJSON(t, want))
	jsonEqual(t, j.Labels, mustJSON(t, want))
	jsonEqual(t, j.Spec.Selector, `{"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}`)
}

// TestDefaultUnknownType: objects of other types are left alone.
func TestDefaultUnknownType(t *testing.T) {
	rs := &appsv1beta2.ReplicaSet{Spec: appsv1beta2.ReplicaSetSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "a"}}}}}}
	Default(rs)
	if rs.Spec.Template.Spec.RestartPolicy != "" {
		t.Fatalf("an apps/v1beta2 ReplicaSet was defaulted: %+v", rs.Spec.Template.Spec)
	}
	Default(nil)
	Default((*corev1.Pod)(nil))
}

func TestImagePullPolicy(t *testing.T) {
	tests := []struct {
		image string
		want  corev1.PullPolicy
	}{
		{"nginx", corev1.PullAlways},
		{"nginx:latest", corev1.PullAlways},
		{"nginx:1.25", corev1.PullIfNotPresent},
		{"docker.io/library/nginx", corev1.PullAlways},
		{"localhost:5000/app", corev1.PullAlways},
		{"localhost:5000/app:v2", corev1.PullIfNotPresent},
		{"app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullIfNotPresent},
		{"app:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullAlways},
		{"Nginx", corev1.PullIfNotPresent},
		{"", corev1.PullIfNotPresent},
		{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullIfNotPresent},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			if got := pullPolicyFor(tt.image); got != tt.want {
				t.Fatalf("pullPolicyFor(%q) = %s, want %s", tt.image, got, tt.want)
			}
		})
	}
}
