package volumes

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Env is the environment of container c of pod as KEY=VALUE strings, as
// the kubelet computes it (Service variables aside): first envFrom, source
// by source, each ConfigMap or Secret's keys in order and with the
// source's prefix; then env in order. A later definition of a name
// replaces the value of an earlier one and keeps its place. A literal
// value has its $(VAR) references expanded from the variables defined
// before it ($$ is a literal $, an unknown reference stays as it is);
// values from valueFrom are not expanded.
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
	var env envList
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
			env.set(ev.Name, expand(ev.Value, env.lookup))
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
	return env.strings(), nil
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
