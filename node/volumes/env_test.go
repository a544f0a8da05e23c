package volumes

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "alpha", "B": "", "X$(Y": "odd"}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "alpha"},
		{"pre-$(A)-post", "pre-alpha-post"},
		{"$(A)$(A)", "alphaalpha"},
		{"$(B)x", "x"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$alpha"},
		{"$$$$", "$$"},
		{"$A", "$A"},
		{"a$", "a$"},
		{"$", "$"},
		{"$(A", "$(A"},
		{"x $( y", "x $( y"},
		{"$()", "$()"},
		{"$(X$(Y)", "odd"},
		{"100$ and $(A)", "100$ and alpha"},
	} {
		if got := expand(tc.in, lookup); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestEnv(t *testing.T) {
	src := newFakeSources()
	src.addConfigMap("cfg", map[string]string{"B_KEY": "b-from-cm", "A_KEY": "a-from-cm", "LEVEL": "debug", "bad=key": "x"})
	src.addSecret("creds", map[string]string{"PASSWORD": "hunter2", "USER": "admin"})
	m, logs := newManager(t, src)
	pod := testPod()
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "side", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}}})
	field := func(p string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: p}}
	}
	res := func(r, div, ctr string) *corev1.EnvVarSource {
		s := &corev1.ResourceFieldSelector{Resource: r, ContainerName: ctr}
		if div != "" {
			s.Divisor = resource.MustParse(div)
		}
		return &corev1.EnvVarSource{ResourceFieldRef: s}
	}
	cmKey := func(name, key string, optional bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: &optional}}
	}
	secKey := func(name, key string, optional *bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: optional}}
	}
	c := &pod.Spec.Containers[0]
	c.EnvFrom = []corev1.EnvFromSource{
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
		{Prefix: "DB_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}},
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Optional: ptr(true)}},
	}
	c.Env = []corev1.EnvVar{
		{Name: "LEVEL", Value: "info"},                               // replaces envFrom's value, keeps its place
		{Name: "GREETING", Value: "hello $(DB_USER) at $(POD_NAME)"}, // POD_NAME is defined later
		{Name: "POD_NAME", ValueFrom: field("metadata.name")},
		{Name: "AFTER", Value: "$(POD_NAME)/$$(POD_NAME)/$(NOPE)"},
		{Name: "FROM_CM", ValueFrom: cmKey("cfg", "A_KEY", false)},
		{Name: "NOT_EXPANDED", ValueFrom: cmKey("cfg", "LEVEL", false)},
		{Name: "OPT_KEY", ValueFrom: cmKey("cfg", "missing", true)},
		{Name: "OPT_CM", ValueFrom: cmKey("gone", "k", true)},
		{Name: "OPT_SECRET", ValueFrom: secKey("gone", "k", ptr(true))},
		{Name: "PASS", ValueFrom: secKey("creds", "PASSWORD", nil)},
		{Name: "NS", ValueFrom: field("metadata.namespace")},
		{Name: "UID", ValueFrom: field("metadata.uid")},
		{Name: "APP", ValueFrom: field("metadata.labels['app']")},
		{Name: "NOTE", ValueFrom: field("metadata.annotations['note']")},
		{Name: "NO_LABEL", ValueFrom: field("metadata.labels['nope']")},
		{Name: "NODE", ValueFrom: field("spec.nodeName")},
		{Name: "SA", ValueFrom: field("spec.serviceAccountName")},
		{Name: "POD_IP", ValueFrom: field("status.podIP")},
		{Name: "POD_IPS", ValueFrom: field("status.podIPs")},
		{Name: "HOST_IP", ValueFrom: field("status.hostIP")},
		{Name: "HOST_IPS", ValueFrom: field("status.hostIPs")},
		{Name: "CPU_REQ_M", ValueFrom: res("requests.cpu", "1m", "")},
		{Name: "CPU_REQ", ValueFrom: res("requests.cpu", "", "")},          // 250m rounds up to 1
		{Name: "CPU_LIMIT", ValueFrom: res("limits.cpu", "", "")},          // node allocatable
		{Name: "MEM_LIMIT_MI", ValueFrom: res("limits.memory", "1Mi", "")}, // node allocatable
		{Name: "MEM_REQ", ValueFrom: res("requests.memory", "", "")},
		{Name: "SIDE_MEM_MI", ValueFrom: res("limits.memory", "1Mi", "side")},
		{Name: "EPH_REQ", ValueFrom: res("requests.ephemeral-storage", "", "")},
		{Name: "EMPTY"},
	}
	env, err := m.Env(context.Background(), pod, c)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"A_KEY=a-from-cm", "B_KEY=b-from-cm", "LEVEL=info", // envFrom keys sorted, invalid key skipped
		"DB_PASSWORD=hunter2", "DB_USER=admin",
		"GREETING=hello admin at $(POD_NAME)",
		"POD_NAME=web",
		"AFTER=web/$(POD_NAME)/$(NOPE)",
		"FROM_CM=a-from-cm",
		"NOT_EXPANDED=debug",
		"PASS=hunter2",
		"NS=default", "UID=uid-1", "APP=web", `NOTE=say "hi"`, "NO_LABEL=",
		"NODE=pi1", "SA=default",
		"POD_IP=10.42.1.5", "POD_IPS=10.42.1.5,fd00::5", "HOST_IP=192.168.1.10", "HOST_IPS=192.168.1.10",
		"CPU_REQ_M=250", "CPU_REQ=1", "CPU_LIMIT=4", "MEM_LIMIT_MI=1024", "MEM_REQ=67108864", "SIDE_MEM_MI=32",
		"EPH_REQ=0", "EMPTY=",
	}
	if !slices.Equal(env, want) {
		t.Errorf("env:\n got %q\nwant %q", env, want)
	}
	if !strings.Contains(logs.String(), "bad=key") {
		t.Errorf("the skipped envFrom key is not logged: %s", logs)
	}
	if src.gets > 4 { // cfg, creds, gone (configmap), gone (secret): each once
		t.Errorf("%d lookups, want each object looked up once", src.gets)
	}
}

// The Service variables, as the kubelet gives them: the pod's namespace's
// Services (unless enableServiceLinks is false) and the kubernetes
// Service of the default namespace always; env and envFrom win over them,
// and env values may refer to them.
func TestEnvServices(t *testing.T) {
	svc := func(ns, name, ip string, ports ...corev1.ServicePort) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
	}
	src := newFakeSources()
	src.services = []*corev1.Service{
		svc("default", "kubernetes", "10.43.0.1", corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}),
		svc("default", "web-front", "10.43.0.20", corev1.ServicePort{Name: "http", Port: 80},
			corev1.ServicePort{Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP}),
		svc("default", "headless", corev1.ClusterIPNone, corev1.ServicePort{Port: 80}),
		svc("default", "outside", "", corev1.ServicePort{Port: 80}), // ExternalName
		svc("other", "db", "10.43.0.30", corev1.ServicePort{Port: 5432}),
		svc("other", "kubernetes", "10.43.0.40", corev1.ServicePort{Port: 8443}), // not the API server
	}
	m, _ := newManager(t, src)
	all := func(t *testing.T, ns string, links *bool, env ...corev1.EnvVar) []string {
		t.Helper()
		pod := testPod()
		pod.Namespace, pod.Spec.EnableServiceLinks = ns, links
		c := &pod.Spec.Containers[0]
		c.Env = env
		out, err := m.Env(context.Background(), pod, c)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	api := []string{"KUBERNETES_SERVICE_HOST=10.43.0.1", "KUBERNETES_SERVICE_PORT=443", "KUBERNETES_SERVICE_PORT_HTTPS=443",
		"KUBERNETES_PORT=tcp://10.43.0.1:443", "KUBERNETES_PORT_443_TCP=tcp://10.43.0.1:443", "KUBERNETES_PORT_443_TCP_PROTO=tcp",
		"KUBERNETES_PORT_443_TCP_PORT=443", "KUBERNETES_PORT_443_TCP_ADDR=10.43.0.1"}
	web := []string{"WEB_FRONT_SERVICE_HOST=10.43.0.20", "WEB_FRONT_SERVICE_PORT=80", "WEB_FRONT_SERVICE_PORT_HTTP=80",
		"WEB_FRONT_SERVICE_PORT_DNS_UDP=53", "WEB_FRONT_PORT=tcp://10.43.0.20:80", "WEB_FRONT_PORT_80_TCP=tcp://10.43.0.20:80",
		"WEB_FRONT_PORT_80_TCP_PROTO=tcp", "WEB_FRONT_PORT_80_TCP_PORT=80", "WEB_FRONT_PORT_80_TCP_ADDR=10.43.0.20",
		"WEB_FRONT_PORT_53_UDP=udp://10.43.0.20:53", "WEB_FRONT_PORT_53_UDP_PROTO=udp", "WEB_FRONT_PORT_53_UDP_PORT=53",
		"WEB_FRONT_PORT_53_UDP_ADDR=10.43.0.20"}
	t.Run("default namespace", func(t *testing.T) {
		if got, want := all(t, "default", nil), append(slices.Clone(api), web...); !slices.Equal(got, want) {
			t.Errorf("env:\n got %q\nwant %q", got, want)
		}
	})
	t.Run("enableServiceLinks false", func(t *testing.T) {
		if got := all(t, "default", ptr(false)); !slices.Equal(got, api) {
			t.Errorf("env:\n got %q\nwant %q", got, api)
		}
	})
	t.Run("another namespace's own kubernetes Service wins", func(t *testing.T) {
		got := all(t, "other", nil)
		want := []string{"DB_SERVICE_HOST=10.43.0.30", "DB_SERVICE_PORT=5432", "DB_PORT=tcp://10.43.0.30:5432",
			"DB_PORT_5432_TCP=tcp://10.43.0.30:5432", "DB_PORT_5432_TCP_PROTO=tcp", "DB_PORT_5432_TCP_PORT=5432",
			"DB_PORT_5432_TCP_ADDR=10.43.0.30", "KUBERNETES_SERVICE_HOST=10.43.0.40", "KUBERNETES_SERVICE_PORT=8443",
			"KUBERNETES_PORT=tcp://10.43.0.40:8443", "KUBERNETES_PORT_8443_TCP=tcp://10.43.0.40:8443",
			"KUBERNETES_PORT_8443_TCP_PROTO=tcp", "KUBERNETES_PORT_8443_TCP_PORT=8443", "KUBERNETES_PORT_8443_TCP_ADDR=10.43.0.40"}
		if !slices.Equal(got, want) {
			t.Errorf("env:\n got %q\nwant %q", got, want)
		}
	})
	t.Run("env wins and refers to them", func(t *testing.T) {
		got := all(t, "default", ptr(false), corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: "api.local"},
			corev1.EnvVar{Name: "URL", Value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"})
		want := append([]string{"KUBERNETES_SERVICE_HOST=api.local", "URL=https://api.local:443"}, api[1:]...)
		if !slices.Equal(got, want) {
			t.Errorf("env:\n got %q\nwant %q", got, want)
		}
	})
	t.Run("not read yet", func(t *testing.T) {
		src.servicesErr = errors.New("the Services have not been read yet")
		defer func() { src.servicesErr = nil }()
		pod := testPod()
		if _, err := m.Env(context.Background(), pod, &pod.Spec.Containers[0]); err == nil || !strings.Contains(err.Error(), "not been read") {
			t.Errorf("err %v, want the Services' error", err)
		}
	})
}

func TestExpandArgs(t *testing.T) {
	env := []string{"A=alpha", "B=beta"}
	if got := ExpandArgs(nil, env); got != nil {
		t.Errorf("nil args: %q", got)
	}
	got := ExpandArgs([]string{"sh", "-c", "echo $(A) $(B) $$(A) $(C)"}, env)
	if want := []string{"sh", "-c", "echo alpha beta $(A) $(C)"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestEnvErrors(t *testing.T) {
	src := newFakeSources()
	src.addConfigMap("cfg", map[string]string{"K": "v"})
	src.addSecret("creds", map[string]string{"K": "v"})
	for _, tc := range []struct {
		name     string
		c        corev1.Container
		want     string
		notFound bool
	}{
		{"missing configmap", corev1.Container{Name: "app", Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}, Key: "K"}}}}},
			`container "app": env "X": configmap "app-config" not found`, true},
		{"missing key", corev1.Container{Name: "app", Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "nope"}}}}},
			`configmap "cfg" has no key "nope"`, false},
		{"missing secret key, optional false", corev1.Container{Name: "app", Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "nope", Optional: ptr(false)}}}}},
			`secret "creds" has no key "nope"`, false},
		{"missing envFrom secret", corev1.Container{Name: "app", EnvFrom: []corev1.EnvFromSource{
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}},
			`container "app": envFrom[0]: secret "db" not found`, true},
		{"unsupported field", corev1.Container{Name: "app", Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}},
			`fieldRef "metadata.labels" is not supported in the environment`, false},
		{"unsupported resource", corev1.Container{Name: "app", Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
			ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.gpu"}}}}},
			`resourceFieldRef "limits.gpu" is not supported`, false},
		{"unknown container", corev1.Container{Name: "app", Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
			ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu", ContainerName: "ghost"}}}}},
			`no container "ghost"`, false},
		{"bad name", corev1.Container{Name: "app", Env: []corev1.EnvVar{{Name: "A=B", Value: "x"}}},
			`env[0]: invalid name "A=B"`, false},
		{"fileKeyRef", corev1.Container{Name: "app", Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
			FileKeyRef: &corev1.FileKeySelector{}}}}},
			`fileKeyRef is not supported by isle`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newManager(t, src)
			_, err := m.Env(context.Background(), testPod(), &tc.c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if apierrors.IsNotFound(err) != tc.notFound {
				t.Errorf("IsNotFound = %v, want %v", !tc.notFound, tc.notFound)
			}
		})
	}
}

func TestPodMemoryLimitAndResourceDefaults(t *testing.T) {
	lim := func(mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	always := corev1.ContainerRestartPolicyAlways
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want int64
		ok   bool
	}{
		{"sum of containers", corev1.PodSpec{Containers: []corev1.Container{{Resources: lim("64Mi")}, {Resources: lim("32Mi")}}}, 96 << 20, true},
		{"one container unlimited", corev1.PodSpec{Containers: []corev1.Container{{Resources: lim("64Mi")}, {}}}, 0, false},
		{"big init container", corev1.PodSpec{InitContainers: []corev1.Container{{Resources: lim("512Mi")}},
			Containers: []corev1.Container{{Resources: lim("64Mi")}}}, 512 << 20, true},
		{"sidecar adds", corev1.PodSpec{InitContainers: []corev1.Container{{Resources: lim("16Mi"), RestartPolicy: &always}},
			Containers: []corev1.Container{{Resources: lim("64Mi")}}}, 80 << 20, true},
		{"pod-level limit", corev1.PodSpec{Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
			Containers: []corev1.Container{{}}}, 1 << 30, true},
	} {
		got, ok := podMemoryLimit(&corev1.Pod{Spec: tc.spec})
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: podMemoryLimit = %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	// A container without a limit reads the pod-level one before the node's.
	pod := &corev1.Pod{Spec: corev1.PodSpec{Resources: &corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}, Containers: []corev1.Container{{Name: "a"}}}}
	v, err := containerResource(pod, &pod.Spec.Containers[0], &corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1m")},
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")})
	if err != nil || v != "1500" {
		t.Errorf("limits.cpu = %q, %v; want 1500", v, err)
	}
	if _, err := containerResource(pod, &pod.Spec.Containers[0], &corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("-1")}, nil); err == nil {
		t.Error("a negative divisor is accepted")
	}
}
