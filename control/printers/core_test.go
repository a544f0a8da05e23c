package printers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestServiceRows(t *testing.T) {
	nodePort := nodePortService()
	pending := pendingLoadBalancer()

	kubernetes := corev1.Service{
		ObjectMeta: meta("kubernetes", 90*24*time.Hour),
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeClusterIP,
			ClusterIP:  "10.96.0.1",
			ClusterIPs: []string{"10.96.0.1"},
			Ports:      []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}},
		},
	}

	dns := corev1.Service{
		ObjectMeta: meta("kube-dns", 90*24*time.Hour),
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeClusterIP,
			ClusterIPs: []string{"10.96.0.10"},
			Selector:   map[string]string{"k8s-app": "kube-dns"},
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
				{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP},
			},
		},
	}

	assigned := pendingLoadBalancer()
	assigned.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{
		{IP: "192.168.1.241"}, {Hostname: "lb.example.com"}, {IP: "192.168.1.240"}, {IP: "192.168.1.241"},
	}

	withExternal := assigned.DeepCopy()
	withExternal.Spec.ExternalIPs = []string{"203.0.113.10"}

	pendingWithExternal := pendingLoadBalancer()
	pendingWithExternal.Spec.ExternalIPs = []string{"203.0.113.10"}

	clusterExternal := kubernetes.DeepCopy()
	clusterExternal.Spec.ExternalIPs = []string{"203.0.113.1", "203.0.113.2"}

	external := corev1.Service{
		ObjectMeta: meta("db", 12*time.Hour),
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"},
	}

	headless := corev1.Service{
		ObjectMeta: meta("db-headless", 12*time.Hour),
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: "None", ClusterIPs: []string{"None"},
			Selector: map[string]string{"app": "db"},
			Ports:    []corev1.ServicePort{{Port: 5432, Protocol: corev1.ProtocolTCP}},
		},
	}

	notDefaulted := corev1.Service{
		ObjectMeta: meta("raw", time.Minute),
		Spec:       corev1.ServiceSpec{ClusterIP: "10.96.7.7"},
	}

	tests := []struct {
		name string
		svc  *corev1.Service
		want []interface{}
	}{
		{"cluster IP", &kubernetes, []interface{}{"kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP", "90d", "<none>"}},
		{"several ports", &dns, []interface{}{"kube-dns", "ClusterIP", "10.96.0.10", "<none>", "53/UDP,53/TCP,9153/TCP", "90d", "k8s-app=kube-dns"}},
		{"node port", &nodePort, []interface{}{"web", "NodePort", "10.96.12.34", "<none>", "80:30080/TCP", "2d", "app=web"}},
		{"load balancer pending", &pending, []interface{}{"ingress-nginx-controller", "LoadBalancer", "10.96.200.10", "<pending>", "80:31080/TCP,443:31443/TCP", "10m",
			"app.kubernetes.io/component=controller,app.kubernetes.io/name=ingress-nginx"}},
		{"load balancer assigned, sorted and unique", &assigned, []interface{}{"ingress-nginx-controller", "LoadBalancer", "10.96.200.10", "192.168.1.240,192.168.1.241,lb.example.com", "80:31080/TCP,443:31443/TCP", "10m",
			"app.kubernetes.io/component=controller,app.kubernetes.io/name=ingress-nginx"}},
		{"load balancer and external IPs", withExternal, []interface{}{"ingress-nginx-controller", "LoadBalancer", "10.96.200.10", "192.168.1.240,192.168.1.241,lb.example.com,203.0.113.10", "80:31080/TCP,443:31443/TCP", "10m",
			"app.kubernetes.io/component=controller,app.kubernetes.io/name=ingress-nginx"}},
		{"pending load balancer with external IPs", &pendingWithExternal, []interface{}{"ingress-nginx-controller", "LoadBalancer", "10.96.200.10", "203.0.113.10", "80:31080/TCP,443:31443/TCP", "10m",
			"app.kubernetes.io/component=controller,app.kubernetes.io/name=ingress-nginx"}},
		{"cluster IP with external IPs", clusterExternal, []interface{}{"kubernetes", "ClusterIP", "10.96.0.1", "203.0.113.1,203.0.113.2", "443/TCP", "90d", "<none>"}},
		{"external name", &external, []interface{}{"db", "ExternalName", "<none>", "db.example.com", "<none>", "12h", "<none>"}},
		{"headless", &headless, []interface{}{"db-headless", "ClusterIP", "None", "<none>", "5432/TCP", "12h", "app=db"}},
		{"not defaulted", &notDefaulted, []interface{}{"raw", "", "10.96.7.7", "<unknown>", "<none>", "60s", "<none>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("", "services"), tt.svc, tt.want)
		})
	}
}

func TestEndpointsRows(t *testing.T) {
	web := endpoints()
	many := corev1.Endpoints{
		ObjectMeta: meta("many", time.Hour),
		Subsets: []corev1.EndpointSubset{
			{
				Addresses: []corev1.EndpointAddress{{IP: "10.244.1.5"}, {IP: "10.244.2.7"}},
				Ports:     []corev1.EndpointPort{{Name: "http", Port: 80}, {Name: "metrics", Port: 9090}},
			},
			{Addresses: []corev1.EndpointAddress{{IP: "10.244.3.2"}}, Ports: []corev1.EndpointPort{{Port: 80}}},
		},
	}
	headless := corev1.Endpoints{
		ObjectMeta: meta("headless", time.Hour),
		Subsets:    []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.244.1.5"}, {IP: "fd00::5"}}}},
	}
	notReady := corev1.Endpoints{
		ObjectMeta: meta("starting", time.Hour),
		Subsets: []corev1.EndpointSubset{{
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.244.1.5"}},
			Ports:             []corev1.EndpointPort{{Port: 80}},
		}},
	}
	empty := corev1.Endpoints{ObjectMeta: meta("empty", time.Hour)}

	tests := []struct {
		name string
		ep   *corev1.Endpoints
		want []interface{}
	}{
		{"one port", &web, []interface{}{"web", "10.244.1.5:8080,10.244.2.7:8080", "2d"}},
		{"more than three", &many, []interface{}{"many", "10.244.1.5:80,10.244.2.7:80,10.244.1.5:9090 + 2 more...", "60m"}},
		{"no ports", &headless, []interface{}{"headless", "10.244.1.5,fd00::5", "60m"}},
		{"only not-ready addresses", &notReady, []interface{}{"starting", "", "60m"}},
		{"no subsets", &empty, []interface{}{"empty", "<none>", "60m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("", "endpoints"), tt.ep, tt.want)
		})
	}
}

func TestConfigObjectRows(t *testing.T) {
	tests := []struct {
		name string
		obj  runtime.Object
		want []interface{}
	}{
		{"configmap", &corev1.ConfigMap{ObjectMeta: meta("settings", 26*time.Hour), Data: map[string]string{"a": "1", "b": "2"}, BinaryData: map[string][]byte{"logo.png": {0x89}}},
			[]interface{}{"settings", int64(3), "26h"}},
		{"empty configmap", &corev1.ConfigMap{ObjectMeta: meta("empty", time.Second)},
			[]interface{}{"empty", int64(0), "1s"}},
		{"tls secret", &corev1.Secret{ObjectMeta: meta("tls", 8*24*time.Hour), Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": {1}, "tls.key": {2}}},
			[]interface{}{"tls", "kubernetes.io/tls", int64(2), "8d"}},
		{"opaque secret with stringData", &corev1.Secret{ObjectMeta: meta("creds", time.Minute), Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{"user": []byte("admin")}, StringData: map[string]string{"user": "root", "password": "hunter2"}},
			[]interface{}{"creds", "Opaque", int64(2), "60s"}},
		{"service account", &corev1.ServiceAccount{ObjectMeta: meta("default", 90*24*time.Hour)},
			[]interface{}{"default", int64(0), "90d"}},
		{"service account with secrets", &corev1.ServiceAccount{ObjectMeta: meta("builder", 2*time.Hour),
			Secrets: []corev1.ObjectReference{{Name: "builder-token"}, {Name: "registry"}}},
			[]interface{}{"builder", int64(2), "120m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resource := "configmaps"
			switch tt.obj.(type) {
			case *corev1.Secret:
				resource = "secrets"
			case *corev1.ServiceAccount:
				resource = "serviceaccounts"
			}
			checkCells(t, gr("", resource), tt.obj, tt.want)
		})
	}
}
