package volumes

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Env is the environment of container c of pod as KEY=VALUE strings, as
// the kubelet computes it: first envFrom, source by source, each ConfigMap
// or Secret's keys in order and with the source's prefix; then env in
// order; then the Service variables (serviceEnv) that neither defined. A
// later definition of a name replaces the value of an earlier one and
// keeps its place. A literal value has its $(VAR) references expanded
// from the variables defined before it and the Service variables ($$ is a
// literal $, an unknown reference stays as it is); values from valueFrom
// are not expanded.
//
// A missing ConfigMap, Secret or key is an error naming it, unless its
// reference is optional: then the variable (or the envFrom source) is
// left out. status.podIP(s) and status.hostIP(s) are read from pod's
// status, which the caller fills in for a pod whose sandbox is running.
func (m *Manager) Env(ctx context.Context, pod *corev1.Pod, c *corev1.Container) ([]string, error) {
	if err := checkPod(pod); err != nil {
		return nil, fmt.Errorf("volumes: env: %w", err)
	}
	if c == nil {
		return nil, fmt.Errorf("volumes: env of pod %s/%s: no container", pod.Namespace, pod.Name)
	}
	services, err := m.cfg.Sources.Services(ctx)
	if err != nil {
		return nil, fmt.Errorf("volumes: env of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	svcEnv := serviceEnv(services, pod.Namespace, pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks)
	var env envList
	lookup := func(name string) (string, bool) {
		if v, ok := env.lookup(name); ok {
			return v, true
		}
		return svcEnv.lookup(name)
	}
	f := newFetcher(ctx, m.cfg.Sources, pod.Namespace)
	for i := range c.EnvFrom {
		if err := m.envFrom(f, &env, &c.EnvFrom[i]); err != nil {
			return nil, fmt.Errorf("volumes: container %q: envFrom[%d]: %w", c.Name, i, err)
		}
	}
	for i := range c.Env {
		ev := &c.Env[i]
		if msgs := validation.IsRelaxedEnvVarName(ev.Name); len(msgs) > 0 {
			return nil, fmt.Errorf("volumes: container %q: env[%d]: invalid name %q: %s", c.Name, i, ev.Name, msgs[0])
		}
		if ev.ValueFrom == nil {
			env.set(ev.Name, expand(ev.Value, lookup))
			continue
		}
		v, ok, err := m.valueFrom(f, pod, c, ev.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("volumes: container %q: env %q: %w", c.Name, ev.Name, err)
		}
		if ok {
			env.set(ev.Name, v)
		}
	}
	for _, n := range svcEnv.names {
		if _, ok := env.lookup(n); !ok {
			env.set(n, svcEnv.values[n])
		}
	}
	return env.strings(), nil
}

// masterServices are the Services of the default namespace whose
// variables every pod gets, enableServiceLinks or not: in-cluster clients
// find the API server by KUBERNETES_SERVICE_HOST and _PORT.
var masterServices = []string{"kubernetes"}

// serviceEnv is the variables that tell a pod of namespace where the
// Services are, as the kubelet makes them: for each Service with a
// cluster IP (the master Services of the default namespace always; the
// namespace's own if links is set), NAME_SERVICE_HOST, NAME_SERVICE_PORT
// (the first port) and NAME_SERVICE_PORT_PORTNAME for each named port,
// and Docker's link variables (NAME_PORT=tcp://ip:port for the first
// port; NAME_PORT_<port>_<PROTO> with _PROTO, _PORT and _ADDR for each).
// NAME is the Service's name upper-cased with - as _. A Service of the
// pod's namespace wins over a master Service of the same name. Names in
// sorted order.
func serviceEnv(services []*corev1.Service, namespace string, links bool) *envList {
	chosen := map[string]*corev1.Service{}
	for _, s := range services {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone || len(s.Spec.Ports) == 0 {
			continue
		}
		switch {
		case s.Namespace == namespace && links:
			chosen[s.Name] = s
		case s.Namespace == metav1.NamespaceDefault && slices.Contains(masterServices, s.Name):
			if _, ok := chosen[s.Name]; !ok {
				chosen[s.Name] = s
			}
		}
	}
	var all envList
	for _, name := range slices.Sorted(maps.Keys(chosen)) {
		s := chosen[name]
		prefix := strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		ip := s.Spec.ClusterIP
		all.set(prefix+"_SERVICE_HOST", ip)
		all.set(prefix+"_SERVICE_PORT", strconv.Itoa(int(s.Spec.Ports[0].Port)))
		for _, p := range s.Spec.Ports {
			if p.Name != "" {
				all.set(prefix+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_")), strconv.Itoa(int(p.Port)))
			}
		}
		for i, p := range s.Spec.Ports {
			proto := string(p.Protocol)
			if proto == "" {
				proto = string(corev1.ProtocolTCP)
			}
			port := strconv.Itoa(int(p.Port))
			url := strings.ToLower(proto) + "://" + net.JoinHostPort(ip, port)
			if i == 0 {
				all.set(prefix+"_PORT", url)
			}
			pp := prefix + "_PORT_" + port + "_" + strings.ToUpper(proto)
			all.set(pp, url)
			all.set(pp+"_PROTO", strings.ToLower(proto))
			all.set(pp+"_PORT", port)
			all.set(pp+"_ADDR", ip)
		}
	}
	return &all
}

// envFrom adds the variables of one envFrom source.
func (m *Manager) envFrom(f *fetcher, env *envList, from *corev1.EnvFromSource) error {
	var (
		what     string
		data     map[string]string
		optional *bool
	)
	switch {
	case from.ConfigMapRef != nil && from.SecretRef != nil:
		return fmt.Errorf("both configMapRef and secretRef are set")
	case from.ConfigMapRef != nil:
		what, optional = fmt.Sprintf("configmap %q", from.ConfigMapRef.Name), from.ConfigMapRef.Optional
		cm, err := f.configMap(from.ConfigMapRef.Name)
		if skipOptional(err, optional) {
			return nil
		}
		if err != nil {
			return err
		}
		data = cm.Data
	case from.SecretRef != nil:
		what, optional = fmt.Sprintf("secret %q", from.SecretRef.Name), from.SecretRef.Optional
		s, err := f.secret(from.SecretRef.Name)
		if skipOptional(err, optional) {
			return nil
		}
		if err != nil {
			return err
		}
		data = make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			data[k] = string(v)
		}
	default:
		return fmt.Errorf("neither configMapRef nor secretRef is set")
	}
	var invalid []string
	for _, k := range slices.Sorted(maps.Keys(data)) {
		name := from.Prefix + k
		if len(validation.IsRelaxedEnvVarName(name)) > 0 {
			invalid = append(invalid, k)
			continue
		}
		env.set(name, data[k])
	}
	if len(invalid) > 0 {
		// The kubelet skips them too, with an event.
		m.log.Warn("volumes: envFrom keys skipped: not valid environment variable names",
			"source", what, "keys", invalid)
	}
	return nil
}

// valueFrom is the value of a variable's valueFrom; ok is false for an
// optional reference to something absent.
func (m *Manager) valueFrom(f *fetcher, pod *corev1.Pod, c *corev1.Container, src *corev1.EnvVarSource) (v string, ok bool, err error) {
	switch {
	case src.FieldRef != nil:
		v, err := podField(pod, src.FieldRef, false)
		return v, err == nil, err
	case src.ResourceFieldRef != nil:
		target := c
		if n := src.ResourceFieldRef.ContainerName; n != "" && n != c.Name {
			if target = findContainer(pod, n); target == nil {
				return "", false, fmt.Errorf("resourceFieldRef: no container %q in the pod", n)
			}
		}
		v, err := containerResource(pod, target, src.ResourceFieldRef, m.cfg.Allocatable)
		return v, err == nil, err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := f.configMap(ref.Name)
		if skipOptional(err, ref.Optional) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		v, found := cm.Data[ref.Key]
		if !found {
			if ref.Optional != nil && *ref.Optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %q has no key %q", ref.Name, ref.Key)
		}
		return v, true, nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := f.secret(ref.Name)
		if skipOptional(err, ref.Optional) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		v, found := s.Data[ref.Key]
		if !found {
			if ref.Optional != nil && *ref.Optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %q has no key %q", ref.Name, ref.Key)
		}
		return string(v), true, nil
	case src.FileKeyRef != nil:
		return "", false, fmt.Errorf("fileKeyRef is not supported by isle")
	}
	return "", false, fmt.Errorf("valueFrom names no source")
}

// envList is an environment in definition order.
type envList struct {
	names  []string
	values map[string]string
}

func (e *envList) set(name, value string) {
	if e.values == nil {
		e.values = map[string]string{}
	}
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

func (e *envList) lookup(name string) (string, bool) {
	v, ok := e.values[name]
	return v, ok
}

func (e *envList) strings() []string {
	out := make([]string, len(e.names))
	for i, n := range e.names {
		out[i] = n + "=" + e.values[n]
	}
	return out
}

// expand replaces $(VAR) references in s as Kubernetes does: a known
// variable by its value, an unknown one left as written; $$ is a literal
// $; a $ before anything else, or an unclosed $(, stays as it is.
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// envMap reads KEY=VALUE strings, as Env gives them, for subPathExpr.
func envMap(env []string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
				return v, true
			}
		}
		return "", false
	}
}

// ExpandArgs is a container's command or args with their $(VAR)
// references expanded from env (as Env gives it), as the kubelet expands
// them; nil stays nil.
func ExpandArgs(args []string, env []string) []string {
	if args == nil {
		return nil
	}
	lookup := envMap(env)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = expand(a, lookup)
	}
	return out
}
