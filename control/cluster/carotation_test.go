package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft/rafttest"
)

// storeOfOne is a store of one member, and its registry.
func storeOfOne(t testing.TB) (*Server, *registry.Store) {
	t.Helper()
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	n := c.Node(c.IDs()[0])
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := n.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	return &Server{node: n}, registry.New(registry.Config{Node: n})
}

func createNode(t *testing.T, store *registry.Store, name, ip string, annotations map[string]string) {
	t.Helper()
	res, _ := store.Resources().Lookup(corev1.SchemeGroupVersion.WithResource("nodes"))
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}}}}
	if _, err := store.Create(t.Context(), res, "", n, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func annotateNode(t *testing.T, store *registry.Store, name string, annotations map[string]string) {
	t.Helper()
	res, _ := store.Resources().Lookup(corev1.SchemeGroupVersion.WithResource("nodes"))
	if _, err := store.Mutate(t.Context(), res, "", name, "", func(o runtime.Object) error {
		o.(*corev1.Node).Annotations = annotations
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestNodeAddrs reads the Nodes' addresses from the store's keys, as the
// registry writes them.
func TestNodeAddrs(t *testing.T) {
	srv, store := storeOfOne(t)
	createNode(t, store, "pi4", "10.77.0.14", nil)
	createNode(t, store, "pi5", "10.77.0.15", nil)
	if got := srv.NodeAddrs(); !slices.Equal(got, []string{"10.77.0.14", "10.77.0.15"}) {
		t.Errorf("NodeAddrs = %v, want the two Nodes' InternalIPs", got)
	}
}

// TestCARotationPhases moves a rotation through its phases on a store of
// one server: each phase waits for the boards' annotations it needs, and
// the server's CA, files and token follow.
func TestCARotationPhases(t *testing.T) {
	srv, store := storeOfOne(t)
	dir := t.TempDir()
	id, err := NewIdentity(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	oldHash := id.Token.CAHash
	leaf, err := id.CA.ServingLeaf("s1", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &caRotator{node: srv.node, store: store, id: id, name: srv.node.Members()[0].Name, dataDir: dir,
		leaves: []*pki.Leaf{leaf}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now}
	createNode(t, store, "pi4", "10.77.0.14", map[string]string{wire.AnnotationCATrust: oldHash, wire.AnnotationCAIssuer: oldHash})
	ctx := t.Context()
	if _, err := r.start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.start(ctx); err == nil || !strings.Contains(err.Error(), "under way") {
		t.Errorf("a second start: %v, want a refusal", err)
	}
	steps := func(n int) wire.CARotation {
		t.Helper()
		for range n {
			if err := r.step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		rec, _, err := r.record()
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	rec := steps(3)
	newCert, _ := wire.ParseCertPEM(rec.New)
	newHash := wire.CAHash(newCert)
	if rec.Phase != wire.CAPhaseTrustBoth || !slices.Equal(rec.Waiting, []string{"board pi4: does not trust the new CA yet"}) {
		t.Fatalf("with pi4 trusting the old CA alone: phase %s, waiting %q", rec.Phase, rec.Waiting)
	}
	if len(id.CA.Trusted()) != 2 || wire.CAHash(id.CA.Cert()) != oldHash {
		t.Errorf("trust both: the server trusts %d CAs, signs with %s", len(id.CA.Trusted()), wire.CAHash(id.CA.Cert()))
	}
	annotateNode(t, store, "pi4", map[string]string{wire.AnnotationCATrust: oldHash + "," + newHash, wire.AnnotationCAIssuer: oldHash})
	if rec = steps(2); rec.Phase != wire.CAPhaseIssueNew {
		t.Fatalf("with pi4 trusting both: phase %s, waiting %q, want %s", rec.Phase, rec.Waiting, wire.CAPhaseIssueNew)
	}
	if wire.CAHash(id.CA.Cert()) != newHash || !id.CA.SignedByCurrent(leaf.Current()) {
		t.Error("issue new: the server does not sign with the new CA, or its leaf is the old one's")
	}
	if rec = steps(2); rec.Phase != wire.CAPhaseIssueNew || !slices.Equal(rec.Waiting, []string{"board pi4: its streaming certificate is not the new CA's yet"}) {
		t.Fatalf("with pi4's certificate the old CA's: phase %s, waiting %q", rec.Phase, rec.Waiting)
	}
	annotateNode(t, store, "pi4", map[string]string{wire.AnnotationCATrust: newHash + "," + oldHash, wire.AnnotationCAIssuer: newHash})
	if rec = steps(2); rec.Phase != wire.CAPhaseDropOld {
		t.Fatalf("with pi4's certificate the new CA's: phase %s, waiting %q, want %s", rec.Phase, rec.Waiting, wire.CAPhaseDropOld)
	}
	loaded, err := LoadIdentity(dir)
	if err != nil || loaded.Token.CAHash != newHash || loaded.Token.Secret != id.Token.Secret || wire.CAHash(loaded.CA.Cert()) != newHash {
		t.Fatalf("the server's files after drop-old: %v, token hash %s, want the new CA %s and the same secret", err, loaded.Token.CAHash, newHash)
	}
	if rec = steps(2); rec.Phase != wire.CAPhaseDropOld || !slices.Equal(rec.Waiting, []string{"board pi4: still trusts the old CA"}) {
		t.Fatalf("with pi4 trusting both: phase %s, waiting %q", rec.Phase, rec.Waiting)
	}
	annotateNode(t, store, "pi4", map[string]string{wire.AnnotationCATrust: newHash, wire.AnnotationCAIssuer: newHash})
	if rec = steps(2); rec.Phase != wire.CAPhaseDone || len(rec.Waiting) != 0 {
		t.Fatalf("with pi4 trusting the new CA alone: phase %s, waiting %q, want %s", rec.Phase, rec.Waiting, wire.CAPhaseDone)
	}
	if len(id.CA.Trusted()) != 1 {
		t.Errorf("done: the server trusts %d CAs, want the new one alone", len(id.CA.Trusted()))
	}
	st := r.status(rec)
	b, _ := json.Marshal(st)
	if !strings.Contains(st.Token, newHash[len("sha256:"):]) || strings.Contains(string(b), "newKeySealed\":\"") {
		t.Errorf("the status: token %q, %s; want the new token and no sealed key", st.Token, b)
	}
}

// TestLoadIdentityAfterCrash repairs what a crash between the files of
// the drop-old phase leaves.
func TestLoadIdentityAfterCrash(t *testing.T) {
	dir := t.TempDir()
	id, err := NewIdentity(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	next, err := pki.NewKeyPair("isle-ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := pki.Seal(next.KeyPEM, id.Token.Secret, pki.InfoCAKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range [][2]any{{caNextCertFile, next.CertPEM}, {caNextKeySealed, sealed}, {caKeySealed, sealed}} {
		if err := writeFile(dir, f[0].(string), f[1].([]byte)); err != nil {
			t.Fatal(err)
		}
	}
	// The key is the new CA's, the certificate and the token the old's.
	got, err := LoadIdentity(dir)
	if err != nil || wire.CAHash(got.CA.Cert()) != wire.CAHash(next.Cert) || got.Token.CAHash != wire.CAHash(next.Cert) {
		t.Fatalf("after a crash past the key: %v; want the new CA and its token", err)
	}
	again, err := LoadIdentity(dir)
	if err != nil || again.Token.String() != got.Token.String() {
		t.Errorf("loaded again: %v, token %v, want %v", err, again.Token, got.Token)
	}
}

// FuzzJoin sends the join endpoint what a board on the LAN may: any body
// with the cluster's token. Nothing panics, and the answer is a client
// error or a join; requests that would add a store member are left out
// (the in-memory store has no transport for one).
func FuzzJoin(f *testing.F) {
	for _, seed := range []string{
		`{"name":"pi4","role":"agent","release":"0.2"}`,
		`{"name":"PI4","role":"agent"}`,
		`{"name":"pi4","role":"agent","release":"9.9"}`,
		`{"name":"","role":"server"}`,
		`{"name":"localhost","role":"agent","release":"0.2"}`,
		`{"name":"pi5","role":"agent","release":"0.1"}`,
		`[1,2,3]`,
		`{"name":"pi4","role":"agent","release":"0.2"}{"trailing":true}`,
	} {
		f.Add([]byte(seed))
	}
	srv, _ := storeOfOne(f)
	id, err := NewIdentity(f.TempDir(), time.Now())
	if err != nil {
		f.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := &joinHandler{node: srv.node, id: id, gossipKey: make([]byte, 32), log: log,
		tokens:  &tokenKeeper{node: srv.node, ca: id.CA, gossipKey: make([]byte, 32), now: time.Now, log: log},
		members: &membership{node: srv.node}}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req wire.JoinRequest
		if json.Unmarshal(body, &req) == nil && req.Role == wire.RoleServer && req.RaftAddr != "" && req.APIAddr != "" {
			return
		}
		r := httptest.NewRequest(http.MethodPost, wire.JoinPath, bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+id.Token.Secret)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 && w.Code != http.StatusServiceUnavailable {
			t.Fatalf("%q: %d %s", body, w.Code, w.Body)
		}
	})
}
