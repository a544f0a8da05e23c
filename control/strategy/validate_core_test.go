package strategy

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateConfigMap(t *testing.T) {
	tests := []struct {
		name string
		cm   corev1.ConfigMap
		want []wantErr
	}{
		{"valid", corev1.ConfigMap{Data: map[string]string{"app.conf": "x", "-key_1": "y"}}, nil},
		{"key with slash", corev1.ConfigMap{Data: map[string]string{"a/b": "x"}},
			[]wantErr{{field.ErrorTypeInvalid, "data[a/b]", "a valid config key must consist of alphanumeric characters"}}},
		{"key dot-dot", corev1.ConfigMap{Data: map[string]string{"..": "x"}},
			[]wantErr{{field.ErrorTypeInvalid, "data[..]", ""}}},
		{"binary key invalid", corev1.ConfigMap{BinaryData: map[string][]byte{"a b": {1}}},
			[]wantErr{{field.ErrorTypeInvalid, "binaryData[a b]", ""}}},
		{"key in both", corev1.ConfigMap{Data: map[string]string{"k": "x"}, BinaryData: map[string][]byte{"k": {1}}},
			[]wantErr{{field.ErrorTypeInvalid, "data[k]", "duplicate of key present in binaryData"}}},
		{"too large", corev1.ConfigMap{Data: map[string]string{"a": strings.Repeat("x", 1<<20), "b": "y"}},
			[]wantErr{{field.ErrorTypeTooLong, "[]", "may not be more than 1048576 bytes"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm := tt.cm
			cm.ObjectMeta = objMeta("cfg")
			Default(&cm)
			checkErrs(t, ValidateCreate(&cm), tt.want...)
		})
	}
}

func TestValidateConfigMapUpdate(t *testing.T) {
	tests := []struct {
		name      string
		immutable bool
		mutate    func(cm *corev1.ConfigMap)
		want      []wantErr
	}{
		{"mutable data may change", false, func(cm *corev1.ConfigMap) { cm.Data["a"] = "2" }, nil},
		{"immutable data may not change", true, func(cm *corev1.ConfigMap) { cm.Data["a"] = "2" },
			[]wantErr{{field.ErrorTypeForbidden, "data", "field is immutable when `immutable` is set"}}},
		{"immutable may not be unset", true, func(cm *corev1.ConfigMap) { cm.Immutable = nil },
			[]wantErr{{field.ErrorTypeForbidden, "immutable", "field is immutable when `immutable` is set"}}},
		{"immutable labels may change", true, func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"x": "y"} }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := &corev1.ConfigMap{ObjectMeta: objMeta("cfg"), Data: map[string]string{"a": "1"}}
			if tt.immutable {
				old.Immutable = ptrTo(true)
			}
			cm := old.DeepCopy()
			tt.mutate(cm)
			checkErrs(t, ValidateUpdate(cm, old), tt.want...)
		})
	}
}

func TestValidateSecret(t *testing.T) {
	tests := []struct {
		name string
		s    corev1.Secret
		want []wantErr
	}{
		{"valid", corev1.Secret{Data: map[string][]byte{"password": []byte("x")}}, nil},
		{"key invalid", corev1.Secret{Data: map[string][]byte{"pass word": nil}},
			[]wantErr{{field.ErrorTypeInvalid, "data[pass word]", ""}}},
		{"too large", corev1.Secret{Data: map[string][]byte{"a": make([]byte, 1<<20+1)}},
			[]wantErr{{field.ErrorTypeTooLong, "data", ""}}},
		{"tls without key", corev1.Secret{Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("x")}},
			[]wantErr{{field.ErrorTypeRequired, "data[tls.key]", ""}}},
		{"dockerconfigjson not json", corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{".dockerconfigjson": []byte("{")}},
			[]wantErr{{field.ErrorTypeInvalid, "data[.dockerconfigjson]", ""}}},
		{"service account token without account", corev1.Secret{Type: corev1.SecretTypeServiceAccountToken},
			[]wantErr{{field.ErrorTypeRequired, "metadata.annotations[kubernetes.io/service-account.name]", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s
			s.ObjectMeta = objMeta("sec")
			Default(&s)
			checkErrs(t, ValidateCreate(&s), tt.want...)
		})
	}
}

func TestValidateSecretUpdate(t *testing.T) {
	old := &corev1.Secret{ObjectMeta: objMeta("sec"), Data: map[string][]byte{"a": []byte("1")}, Immutable: ptrTo(true)}
	Default(old)
	s := old.DeepCopy()
	s.Data["a"] = []byte("2")
	s.Type = corev1.SecretTypeBasicAuth
	checkErrs(t, ValidateUpdate(s, old),
		wantErr{field.ErrorTypeForbidden, "data", "field is immutable when `immutable` is set"},
		wantErr{field.ErrorTypeInvalid, "type", "field is immutable"})
}

func TestValidateNamespace(t *testing.T) {
	tests := []struct {
		name string
		ns   corev1.Namespace
		want []wantErr
	}{
		{"valid", corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, nil},
		{"name with dot", corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team.a"}},
			[]wantErr{{field.ErrorTypeInvalid, "metadata.name", "must not contain dots"}}},
		{"namespace set", corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "b"}},
			[]wantErr{{field.ErrorTypeForbidden, "metadata.namespace", "not allowed on this type"}}},
		{"finalizer unqualified", corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"mine"}}},
			[]wantErr{{field.ErrorTypeInvalid, "spec.finalizers", "name is neither a standard finalizer name nor is it fully qualified"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := tt.ns
			Default(&ns)
			checkErrs(t, ValidateCreate(&ns), tt.want...)
		})
	}
	t.Run("status phase must agree with deletion", func(t *testing.T) {
		old := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "3"}}
		Default(old)
		ns := old.DeepCopy()
		ns.Status.Phase = corev1.NamespaceTerminating
		checkErrs(t, ValidateStatusUpdate(ns, old), wantErr{field.ErrorTypeInvalid, "status.Phase", "may only be 'Active' if `deletionTimestamp` is empty"})
	})
}

func TestValidateNode(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(n *corev1.Node)
		want   []wantErr
	}{
		{"valid", func(n *corev1.Node) {}, nil},
		{"pod CIDR invalid", func(n *corev1.Node) { n.Spec.PodCIDRs = []string{"10.244.1.0/33"} },
			[]wantErr{{field.ErrorTypeInvalid, "spec.podCIDRs[0]", ""}}},
		{"two IPv4 pod CIDRs", func(n *corev1.Node) { n.Spec.PodCIDRs = []string{"10.244.1.0/24", "10.244.2.0/24"} },
			[]wantErr{{field.ErrorTypeInvalid, "spec.podCIDRs", "may specify no more than one CIDR for each IP family"}}},
		{"dual-stack pod CIDRs", func(n *corev1.Node) { n.Spec.PodCIDRs = []string{"10.244.1.0/24", "fd00:10:244:1::/64"} }, nil},
		{"taint effect missing", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: "k"}} },
			[]wantErr{{field.ErrorTypeRequired, "metadata.taints[0].effect", ""}}},
		{"capacity negative", func(n *corev1.Node) { n.Status.Capacity = corev1.ResourceList{"cpu": resource.MustParse("-1")} },
			[]wantErr{{field.ErrorTypeInvalid, "status.capacity.cpu", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pi-1"}}
			tt.mutate(n)
			Default(n)
			checkErrs(t, ValidateCreate(n), tt.want...)
		})
	}
	t.Run("pod CIDR is immutable once set", func(t *testing.T) {
		old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pi-1", ResourceVersion: "2"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}}}
		n := old.DeepCopy()
		n.Spec.PodCIDRs = []string{"10.244.9.0/24"}
		checkErrs(t, ValidateUpdate(n, old), wantErr{field.ErrorTypeForbidden, "spec.podCIDRs", "node updates may not change podCIDR"})
	})
}

func TestValidateEvent(t *testing.T) {
	tests := []struct {
		name string
		ev   corev1.Event
		want []wantErr
	}{
		{"legacy event", corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "default"}, Reason: "Started"}, nil},
		{"namespace mismatch", corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "other"}},
			[]wantErr{{field.ErrorTypeInvalid, "involvedObject.namespace", "does not match event.namespace"}}},
		{"new-style event needs reporter", corev1.Event{EventTime: metav1.NewMicroTime(time.Unix(1700000000, 0)),
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "default"}},
			[]wantErr{{field.ErrorTypeRequired, "reportingController", ""}, {field.ErrorTypeRequired, "action", ""}, {field.ErrorTypeRequired, "reason", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := tt.ev
			ev.ObjectMeta = objMeta("p.17a1")
			checkErrs(t, ValidateCreate(&ev), tt.want...)
		})
	}
	t.Run("name must be a path segment", func(t *testing.T) {
		ev := corev1.Event{ObjectMeta: objMeta("a/b"), InvolvedObject: corev1.ObjectReference{Namespace: "default"}}
		checkErrs(t, ValidateCreate(&ev), wantErr{field.ErrorTypeInvalid, "metadata.name", "may not contain '/'"})
	})
}

func TestValidateLease(t *testing.T) {
	tests := []struct {
		name string
		spec coordinationv1.LeaseSpec
		want []wantErr
	}{
		{"valid", coordinationv1.LeaseSpec{HolderIdentity: ptrTo("a"), LeaseDurationSeconds: ptrTo(int32(15))}, nil},
		{"duration zero", coordinationv1.LeaseSpec{LeaseDurationSeconds: ptrTo(int32(0))},
			[]wantErr{{field.ErrorTypeInvalid, "spec.leaseDurationSeconds", "must be greater than 0"}}},
		{"transitions negative", coordinationv1.LeaseSpec{LeaseTransitions: ptrTo(int32(-1))},
			[]wantErr{{field.ErrorTypeInvalid, "spec.leaseTransitions", "must be greater than or equal to 0"}}},
		{"preferred holder without strategy", coordinationv1.LeaseSpec{PreferredHolder: ptrTo("b")},
			[]wantErr{{field.ErrorTypeForbidden, "spec.preferredHolder", "may only be specified if `strategy` is defined"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &coordinationv1.Lease{ObjectMeta: objMeta("isle-leader"), Spec: tt.spec}
			checkErrs(t, ValidateCreate(l), tt.want...)
		})
	}
}

func TestValidateServiceAccount(t *testing.T) {
	sa := &corev1.ServiceAccount{ObjectMeta: objMeta("builder")}
	checkErrs(t, ValidateCreate(sa))
	sa.Name = "Builder"
	checkErrs(t, ValidateCreate(sa), wantErr{field.ErrorTypeInvalid, "metadata.name", ""})
}
