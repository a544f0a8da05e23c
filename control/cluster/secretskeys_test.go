package cluster

import (
	"bytes"
	"encoding/base64"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft/kv"
	"github.com/isle-cluster/isle/raft/rafttest"
)

// TestSecretsEncryption stores Secrets through the registry on a store of
// one member: in clear before the cluster has a key, rewritten once it
// has, encrypted from then on and bound to their keys; then rotates the
// key twice and replaces the CA, and another server reads them all.
func TestSecretsEncryption(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	node := c.Node(c.IDs()[0])
	if err := node.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	id, err := NewIdentity(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	keys := &secretsKeys{node: node, ca: id.CA, log: log}
	store := registry.New(registry.Config{Node: node, Secrets: keys})
	res, _ := store.Resources().Lookup(corev1.SchemeGroupVersion.WithResource("secrets"))
	ctx := t.Context()
	nsRes, _ := store.Resources().Lookup(corev1.SchemeGroupVersion.WithResource("namespaces"))
	if _, err := store.Create(ctx, nsRes, "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	const password = "correct horse battery staple"
	clear64 := base64.StdEncoding.EncodeToString([]byte(password))
	create := func(name string) {
		t.Helper()
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string][]byte{"password": []byte(password)}}
		if _, err := store.Create(ctx, res, "default", s, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	raw := func(name string) kv.KeyValue {
		t.Helper()
		v, found, _ := node.KV().Get(registry.SecretsPrefix + "default/" + name)
		if !found {
			t.Fatalf("no key for Secret %s", name)
		}
		return v
	}
	readable := func(name string) {
		t.Helper()
		obj, err := store.Get(ctx, res, "default", name, metav1.GetOptions{})
		if err != nil || string(obj.(*corev1.Secret).Data["password"]) != password {
			t.Fatalf("Secret %s: %v", name, err)
		}
	}
	encrypted := func(name, key string) {
		t.Helper()
		v := raw(name).Value
		if !bytes.HasPrefix(v, []byte(secretsTag+key+":")) || bytes.Contains(v, []byte(clear64)) || bytes.Contains(v, []byte(name)) {
			t.Fatalf("Secret %s stored as %.80q, want it encrypted with %s", name, v, key)
		}
		readable(name)
	}
	upkeep := func() {
		t.Helper()
		if err := keys.upkeep(ctx); err != nil {
			t.Fatalf("upkeep: %v", err)
		}
	}

	// No key while a member may run a release without them.
	create("before")
	upkeep()
	if v := raw("before").Value; !bytes.Contains(v, []byte(clear64)) {
		t.Fatalf("before any key the Secret is stored as %.80q", v)
	}
	if _, found, _ := node.KV().Get(secretsKeysKey); found {
		t.Fatal("a key was made before every member speaks TLS")
	}
	if _, err := node.Propose(ctx, kv.Op{Type: kv.OpPut, Key: raftTLSKey, Value: []byte("x"), IfModRev: 0}); err != nil {
		t.Fatal(err)
	}
	upkeep() // the first key
	upkeep() // the rewrite
	st, err := keys.status()
	if err != nil || st.Primary == "" || st.Rewritten != st.Primary || st.ByKey[st.Primary] != 1 {
		t.Fatalf("status after the first key: %+v, %v", st, err)
	}
	first := st.Primary
	encrypted("before", first)
	create("after")
	encrypted("after", first)

	// An update that changes nothing writes nothing, though each
	// encryption differs.
	rev := raw("after").ModRevision
	if _, err := store.Mutate(ctx, res, "default", "after", "", func(runtime.Object) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if raw("after").ModRevision != rev {
		t.Error("an update that changed nothing was written")
	}

	// A value moved to another key does not decrypt.
	if _, err := node.Propose(ctx, kv.Op{Type: kv.OpPut, Key: registry.SecretsPrefix + "default/moved", Value: raw("after").Value, IfModRev: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(ctx, res, "default", "moved", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "does not decrypt") {
		t.Fatalf("a Secret moved to another key: %v, want an error", err)
	}
	if _, err := node.Propose(ctx, kv.Op{Type: kv.OpDelete, Key: registry.SecretsPrefix + "default/moved", IfModRev: -1}); err != nil {
		t.Fatal(err)
	}

	// Two rotations: each rewrites every Secret; two keys are kept.
	var last string
	for range 2 {
		if err := keys.rotate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := keys.rotate(ctx); err == nil {
			t.Error("a second rotation was taken before the first was done")
		}
		upkeep()
		st, err = keys.status()
		if err != nil || st.Rewritten != st.Primary || st.ByKey[st.Primary] != 2 || len(st.Keys) != 2 {
			t.Fatalf("status after a rotation: %+v, %v", st, err)
		}
		encrypted("before", st.Primary)
		encrypted("after", st.Primary)
		last = st.Primary
	}
	if st.Keys[0] == first || st.Keys[1] != last {
		t.Errorf("keys held %v: want the first dropped, %s last", st.Keys, last)
	}

	// The CA replaced: the keys are resealed with the new one, which a
	// server that starts afterwards holds alone.
	next, err := pki.NewKeyPair("isle-next", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	id.CA.Rotate(next, id.CA.Cert())
	upkeep()
	rec, _, _, err := keys.record()
	if err != nil || rec.CA != wire.CAHash(next.Cert) {
		t.Fatalf("after the CA's replacement the keys are sealed by %s (%v), want %s", rec.CA, err, wire.CAHash(next.Cert))
	}
	fresh, err := pki.ParseCA(next.CertPEM, next.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	other := &secretsKeys{node: node, ca: fresh, log: log}
	if err := other.load(); err != nil {
		t.Fatalf("another server reads the keys: %v", err)
	}
	for _, name := range []string{"before", "after"} {
		v := raw(name)
		if p, err := other.Open(v.Key, v.Value); err != nil || !bytes.Contains(p, []byte(clear64)) {
			t.Errorf("another server opens %s: %v", name, err)
		}
	}
}
