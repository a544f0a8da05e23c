package registry_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/kv"
)

// typicalPod is a pod as a Deployment's ReplicaSet makes it, with nothing
// of the dictionary's own pod but its shape.
func typicalPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, GenerateName: "shop-7c9f8d6b5-", Labels: map[string]string{"app.kubernetes.io/name": "shop", "pod-template-hash": "7c9f8d6b5"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "shop-7c9f8d6b5", UID: "3f2a4c1e-9b7d-4e8a-a1c2-5d6e7f809a1b", Controller: ptr(true), BlockOwnerDeletion: ptr(true)}}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "shop", Image: "registry.example/shop:2.4.1", Args: []string{"--port=9000", "--log-level=info"},
				Ports:          []corev1.ContainerPort{{Name: "web", ContainerPort: 9000, Protocol: corev1.ProtocolTCP}},
				Env:            []corev1.EnvVar{{Name: "SHOP_DB", Value: "postgres://db:5432/shop"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(9000)}}, PeriodSeconds: 5},
			}},
		},
	}
}

// Stored objects are compressed (a zstd frame with the store's
// dictionary), read back whole through every path, and a pod takes a
// fraction of its JSON.
func TestStoredValuesCompressed(t *testing.T) {
	e := newEnv(t)
	pods := e.pods(t)
	w := e.watch(t, pods, "default", metav1.ListOptions{})
	created := e.create(t, pods, "default", typicalPod("shop-7c9f8d6b5-x2x7k")).(*corev1.Pod)
	raw, found, _ := e.node.KV().Get("/registry/core/pods/default/shop-7c9f8d6b5-x2x7k")
	if !found {
		t.Fatal("the pod is not stored under /registry/pods/default/shop-7c9f8d6b5-x2x7k")
	}
	plain, err := json.Marshal(created)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(raw.Value, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		t.Fatalf("the pod is stored as %q..., want a zstd frame", raw.Value[:min(16, len(raw.Value))])
	}
	t.Logf("a pod of %d bytes of JSON is stored in %d", len(plain), len(raw.Value))
	if len(raw.Value)*3 > len(plain) {
		t.Errorf("a pod of %d bytes of JSON is stored in %d, want at most a third", len(plain), len(raw.Value))
	}
	got := e.get(t, pods, "default", created.Name).(*corev1.Pod)
	if got.Spec.Containers[0].Image != "registry.example/shop:2.4.1" || len(got.ManagedFields) == 0 || got.ResourceVersion != created.ResourceVersion {
		t.Errorf("read back: %+v", got)
	}
	if ev := w.expect(watch.Added, created.Name); ev.Object.(*corev1.Pod).Spec.Containers[0].Env[0].Value != "postgres://db:5432/shop" {
		t.Errorf("watched: %+v", ev.Object)
	}
	out, err := e.List(e.ctx, pods, "default", metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=shop"})
	if err != nil || len(out.(*corev1.PodList).Items) != 1 {
		t.Fatalf("list by labels: %v, %v", out, err)
	}
}

// Values stored as JSON, before values were compressed, read as before.
func TestStoredJSONStillRead(t *testing.T) {
	e := newEnv(t)
	cms := e.cms(t)
	key := "/registry/core/configmaps/default/old"
	value := `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"old","namespace":"default","uid":"0b5e3a5c-1111-4d2e-9f00-000000000001","creationTimestamp":"2026-01-01T00:00:00Z","labels":{"era":"json"}},"data":{"k":"v"}}`
	if _, err := e.node.Propose(e.ctx, kv.Op{Type: kv.OpPut, Key: key, Value: []byte(value)}); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, cms, "default", "old").(*corev1.ConfigMap); got.Data["k"] != "v" {
		t.Fatalf("a value stored as JSON read as %+v", got)
	}
	out, err := e.List(e.ctx, cms, "default", metav1.ListOptions{LabelSelector: "era=json"})
	if err != nil || len(out.(*corev1.ConfigMapList).Items) != 1 {
		t.Fatalf("list by labels: %v, %v", out, err)
	}
	// Its next write stores it compressed.
	cm := e.get(t, cms, "default", "old").(*corev1.ConfigMap)
	cm.Data["k"] = "w"
	if _, err := e.Update(e.ctx, cms, "default", "old", "", cm, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	raw, _, _ := e.node.KV().Get(key)
	if !bytes.HasPrefix(raw.Value, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		t.Errorf("rewritten as %q, want it compressed", raw.Value)
	}
}

// A stored value that does not expand is a 500 naming its key, never a
// crash nor a read without bound; the other objects read on.
func TestStoredValueCorrupt(t *testing.T) {
	e := newEnv(t)
	cms := e.cms(t)
	e.create(t, cms, "default", newConfigMap("good", nil))
	// A frame header claiming 1 TiB of content, and a frame cut short.
	huge := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe4, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00}
	good, _, _ := e.node.KV().Get("/registry/core/configmaps/default/good")
	for name, v := range map[string][]byte{"huge": huge, "cut": good.Value[:len(good.Value)/2]} {
		if _, err := e.node.Propose(e.ctx, kv.Op{Type: kv.OpPut, Key: "/registry/core/configmaps/default/" + name, Value: v}); err != nil {
			t.Fatal(err)
		}
		_, err := e.Get(e.ctx, cms, "default", name, metav1.GetOptions{})
		if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "/registry/core/configmaps/default/"+name) {
			t.Errorf("get %s: %v, want an internal error naming its key", name, err)
		}
	}
	e.get(t, cms, "default", "good")
}

// The store's limit is on the object's JSON, as etcd's is on the request,
// however well it compresses.
func TestStoredSizeLimitBeforeCompression(t *testing.T) {
	e := newEnv(t)
	// Within a ConfigMap's 1 MiB of data, and over 1.5 MiB of JSON: each
	// control character is written \u0001.
	cm := newConfigMap("big", nil)
	cm.Data["k"] = strings.Repeat("\x01", 300_000)
	_, err := e.Create(e.ctx, e.cms(t), "default", cm, registry.WriteOptions{})
	if !apierrors.IsRequestEntityTooLargeError(err) {
		t.Fatalf("a ConfigMap of 1.8 MB of JSON that compresses to almost nothing: %v, want 413", err)
	}
}

// storedDictV1SHA256 is the SHA-256 of storedict-v1.json.
const storedDictV1SHA256 = "d3016f2d2aa12829d672c08bc496a5a1a38e07c866430d7e71738f7cbf877dd8"

// Values stored with the dictionary are read with it for good: it never
// changes. A better one gets a new ID beside it.
func TestStoredDictionaryUnchanged(t *testing.T) {
	sum := sha256.Sum256(registry.StoredDictV1())
	if got := hex.EncodeToString(sum[:]); got != storedDictV1SHA256 {
		t.Fatalf("storedict-v1.json changed (sha256 %s, was %s): the values stored with it would no longer read; restore it and add a new dictionary with its own ID", got, storedDictV1SHA256)
	}
}

// Until every store member reads compressed values (Config.Compress),
// values are stored as JSON; then compressed from their next write.
func TestStoredCompressedOnceEveryMemberReads(t *testing.T) {
	var on atomic.Bool
	e := newEnv(t, func(_ *raft.Config, rcfg *registry.Config) { rcfg.Compress = on.Load })
	cms := e.cms(t)
	key := "/registry/core/configmaps/default/a"
	cm := e.create(t, cms, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"k": strings.Repeat("v", 200)}}).(*corev1.ConfigMap)
	if raw, _, _ := e.node.KV().Get(key); !bytes.HasPrefix(raw.Value, []byte("{")) {
		t.Fatalf("stored as %q before every member reads compressed values, want JSON", raw.Value)
	}
	on.Store(true)
	cm.Data["k"] = strings.Repeat("w", 200)
	if _, err := e.Update(e.ctx, cms, "default", "a", "", cm, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if raw, _, _ := e.node.KV().Get(key); !bytes.HasPrefix(raw.Value, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		t.Fatalf("stored as %q once every member reads compressed values, want a zstd frame", raw.Value)
	}
	if got := e.get(t, cms, "default", "a").(*corev1.ConfigMap); got.Data["k"] != strings.Repeat("w", 200) {
		t.Fatalf("read back %q", got.Data["k"])
	}
}
