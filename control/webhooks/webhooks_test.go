package webhooks

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft/rafttest"
)

// hookServer is a TLS webhook server on loopback: each path answers with
// its function, and every review it got is kept.
type hookServer struct {
	srv *httptest.Server
	ca  []byte
	mu  sync.Mutex
	got map[string][]*admissionv1.AdmissionRequest
	// answer by path: the response to a request (its uid is filled in).
	answer map[string]func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse
}

// newHookServer starts a server whose certificate, from a CA of its own,
// names 127.0.0.1 and hook.default.svc.
func newHookServer(t *testing.T) *hookServer {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "hook"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"hook.default.svc"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	hs := &hookServer{got: map[string][]*admissionv1.AdmissionRequest{},
		answer: map[string]func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse{},
		ca:     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	hs.srv = httptest.NewUnstartedServer(http.HandlerFunc(hs.serve))
	hs.srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	hs.srv.StartTLS()
	t.Cleanup(hs.srv.Close)
	return hs
}

func (hs *hookServer) serve(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	hs.mu.Lock()
	hs.got[r.URL.Path] = append(hs.got[r.URL.Path], review.Request)
	answer := hs.answer[r.URL.Path]
	hs.mu.Unlock()
	resp := &admissionv1.AdmissionResponse{Allowed: true}
	if answer != nil {
		resp = answer(review.Request)
	}
	resp.UID = review.Request.UID
	review.Request, review.Response = nil, resp
	_ = json.NewEncoder(w).Encode(review)
}

func (hs *hookServer) on(path string, f func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.answer[path] = f
}

func (hs *hookServer) requests(path string) []*admissionv1.AdmissionRequest {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return append([]*admissionv1.AdmissionRequest(nil), hs.got[path]...)
}

func (hs *hookServer) url(path string) *string {
	u := hs.srv.URL + path
	return &u
}

// env is a store on a one-member in-process raft, with the namespace
// default, and a Dispatcher on it.
type env struct {
	Store *registry.Store
	d     *Dispatcher
	cms   *registry.Resource
	mres  *registry.Resource
	vres  *registry.Resource
	hs    *hookServer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := &env{Store: registry.New(registry.Config{Node: c.Node(c.IDs()[0]), Logger: log}), hs: newHookServer(t)}
	nsRes := kit.MustLookup(e.Store, corev1.SchemeGroupVersion.WithResource("namespaces"))
	if _, err := e.Store.Create(t.Context(), nsRes, "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.d = NewDispatcher(e.Store, NewClient(e.Store), log)
	e.Store.SetWebhooks(e.d)
	e.cms = kit.MustLookup(e.Store, corev1.SchemeGroupVersion.WithResource("configmaps"))
	e.mres, e.vres = e.d.mres, e.d.vres
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

var (
	none     = admissionregistrationv1.SideEffectClassNone
	ignore   = admissionregistrationv1.Ignore
	ifNeeded = admissionregistrationv1.IfNeededReinvocationPolicy
)

func rules(ops []admissionregistrationv1.OperationType, group, version string, resources ...string) []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{Operations: ops,
		Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: resources}}}
}

var createUpdate = []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}

// validating adds a validating configuration and waits until it is in
// force.
func (e *env) validating(t *testing.T, name string, hooks ...admissionregistrationv1.ValidatingWebhook) {
	t.Helper()
	for i := range hooks {
		if hooks[i].SideEffects == nil {
			hooks[i].SideEffects = &none
		}
		hooks[i].AdmissionReviewVersions = []string{"v1"}
	}
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks}
	if _, err := e.Store.Create(t.Context(), e.vres, "", c, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitHooks(t, func(s *hookSet) bool { return hasHook(s.validating, name) })
}

func (e *env) mutating(t *testing.T, name string, hooks ...admissionregistrationv1.MutatingWebhook) {
	t.Helper()
	for i := range hooks {
		if hooks[i].SideEffects == nil {
			hooks[i].SideEffects = &none
		}
		hooks[i].AdmissionReviewVersions = []string{"v1"}
	}
	c := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks}
	if _, err := e.Store.Create(t.Context(), e.mres, "", c, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitHooks(t, func(s *hookSet) bool { return hasHook(s.mutating, name) })
}

func hasHook(hs []*hook, config string) bool {
	for _, h := range hs {
		if strings.HasPrefix(h.id, config+"/") {
			return true
		}
	}
	return false
}

func (e *env) waitHooks(t *testing.T, cond func(*hookSet) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s := e.d.hooks.Load(); s != nil && cond(s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the webhook configurations did not come into force within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) createCM(ctx context.Context, name string, lbls map[string]string) (runtime.Object, error) {
	return e.Store.Create(ctx, e.cms, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: lbls},
		Data: map[string]string{"k": "v"}}, registry.WriteOptions{})
}

func TestValidatingWebhookDenies(t *testing.T) {
	e := newEnv(t)
	e.hs.on("/deny", func(r *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		var cm corev1.ConfigMap
		_ = json.Unmarshal(r.Object.Raw, &cm)
		if cm.Labels["deny"] == "yes" {
			return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Message: "configmaps labelled deny=yes are not welcome", Code: 403}}
		}
		return &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{"looked at " + cm.Name}}
	})
	e.validating(t, "deny", admissionregistrationv1.ValidatingWebhook{Name: "deny.example.com",
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: e.hs.url("/deny"), CABundle: e.hs.ca},
		Rules:        rules(createUpdate, "", "v1", "configmaps")})

	ctx, warnings := registry.WithWarnings(t.Context())
	_, err := e.createCM(ctx, "bad", map[string]string{"deny": "yes"})
	if !apierrors.IsForbidden(err) || err.Error() != `admission webhook "deny.example.com" denied the request: configmaps labelled deny=yes are not welcome` {
		t.Fatalf("create of a denied ConfigMap: %v, want 403 naming the webhook and its message", err)
	}
	if _, err := e.Store.Get(t.Context(), e.cms, "default", "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the denied ConfigMap was stored: %v", err)
	}
	if _, err := e.createCM(ctx, "good", nil); err != nil {
		t.Fatal(err)
	}
	if w := warnings.List(); len(w) != 1 || w[0] != "looked at good" {
		t.Errorf("warnings %q, want the webhook's", w)
	}
	reqs := e.hs.requests("/deny")
	if len(reqs) != 2 {
		t.Fatalf("the webhook got %d requests, want 2", len(reqs))
	}
	r := reqs[1]
	if r.Operation != admissionv1.Create || r.Kind.Kind != "ConfigMap" || r.Resource.Resource != "configmaps" || r.Namespace != "default" ||
		r.Name != "good" || r.UserInfo.Username != registry.ControllerUser.Username || r.DryRun == nil || *r.DryRun || len(r.OldObject.Raw) != 0 {
		t.Errorf("the review: %+v", r)
	}
	// An update denied; an update of other fields allowed, with the old object.
	_, err = e.Store.Mutate(t.Context(), e.cms, "default", "good", "", func(obj runtime.Object) error {
		obj.(*corev1.ConfigMap).Labels = map[string]string{"deny": "yes"}
		return nil
	})
	if !apierrors.IsForbidden(err) {
		t.Errorf("denied update: %v", err)
	}
	if _, err := e.Store.Mutate(t.Context(), e.cms, "default", "good", "", func(obj runtime.Object) error {
		obj.(*corev1.ConfigMap).Data["k"] = "w"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	reqs = e.hs.requests("/deny")
	last := reqs[len(reqs)-1]
	if last.Operation != admissionv1.Update || !strings.Contains(string(last.OldObject.Raw), `"k":"v"`) || !strings.Contains(string(last.Object.Raw), `"k":"w"`) {
		t.Errorf("the update's review: op %s old %s new %s", last.Operation, last.OldObject.Raw, last.Object.Raw)
	}
	// Deletes are not in the rules: not sent.
	n := len(reqs)
	if _, _, err := e.Store.Delete(t.Context(), e.cms, "default", "good", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(e.hs.requests("/deny")) != n {
		t.Error("a delete went to a webhook of CREATE and UPDATE")
	}
}

func TestMutatingWebhookPatchesAndReinvokes(t *testing.T) {
	e := newEnv(t)
	patch := func(ops string) *admissionv1.AdmissionResponse {
		pt := admissionv1.PatchTypeJSONPatch
		return &admissionv1.AdmissionResponse{Allowed: true, PatchType: &pt, Patch: []byte(ops)}
	}
	// a (IfNeeded) copies the label b sets, once b has set it; b sets it.
	e.hs.on("/a", func(r *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		var cm corev1.ConfigMap
		_ = json.Unmarshal(r.Object.Raw, &cm)
		if v, ok := cm.Labels["b"]; ok {
			return patch(`[{"op":"add","path":"/data/from-b","value":"` + v + `"}]`)
		}
		return &admissionv1.AdmissionResponse{Allowed: true}
	})
	e.hs.on("/b", func(r *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return patch(`[{"op":"add","path":"/metadata/labels","value":{"b":"set"}}]`)
	})
	e.mutating(t, "m1", admissionregistrationv1.MutatingWebhook{Name: "a.example.com", ReinvocationPolicy: &ifNeeded,
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: e.hs.url("/a"), CABundle: e.hs.ca},
		Rules:        rules(createUpdate, "", "v1", "configmaps")})
	e.mutating(t, "m2", admissionregistrationv1.MutatingWebhook{Name: "b.example.com",
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: e.hs.url("/b"), CABundle: e.hs.ca},
		Rules:        rules(createUpdate, "", "v1", "configmaps")})
	if _, err := e.createCM(t.Context(), "c", nil); err != nil {
		t.Fatal(err)
	}
	obj, err := e.Store.Get(t.Context(), e.cms, "default", "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm := obj.(*corev1.ConfigMap)
	if cm.Labels["b"] != "set" || cm.Data["from-b"] != "set" || cm.Data["k"] != "v" {
		t.Errorf("stored %v %v: want b's label and a's copy of it", cm.Labels, cm.Data)
	}
	if n := len(e.hs.requests("/a")); n != 2 {
		t.Errorf("a (IfNeeded) was called %d times, want 2: once more after b changed the object", n)
	}
	if n := len(e.hs.requests("/b")); n != 1 {
		t.Errorf("b was called %d times, want 1", n)
	}
	if cm.UID == "" || cm.ResourceVersion == "" {
		t.Errorf("system fields lost: %+v", cm.ObjectMeta)
	}
	// A patch that changes the kind is refused.
	e.hs.on("/b", func(r *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return patch(`[{"op":"replace","path":"/kind","value":"Secret"}]`)
	})
	if _, err := e.createCM(t.Context(), "d", nil); err == nil || !strings.Contains(err.Error(), "changed the object's kind") {
		t.Errorf("a patch changing the kind: %v", err)
	}
}

func TestWebhookFailurePolicyAndTimeout(t *testing.T) {
	e := newEnv(t)
	// A listener closed at once: nothing answers there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "https://" + ln.Addr().String() + "/"
	ln.Close()
	e.validating(t, "down-ignore", admissionregistrationv1.ValidatingWebhook{Name: "ignore.example.com", FailurePolicy: &ignore,
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &down},
		Rules:        rules(createUpdate, "", "v1", "configmaps")})
	if _, err := e.createCM(t.Context(), "passes", nil); err != nil {
		t.Fatalf("a webhook that is down with failurePolicy Ignore: %v", err)
	}
	e.validating(t, "down-fail", admissionregistrationv1.ValidatingWebhook{Name: "fail.example.com",
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &down},
		Rules:        rules(createUpdate, "", "v1", "configmaps")})
	_, err = e.createCM(t.Context(), "refused", nil)
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), `failed calling webhook "fail.example.com"`) {
		t.Fatalf("a webhook that is down with failurePolicy Fail: %v, want 500 naming it", err)
	}
	// The configurations themselves are never sent to webhooks: the
	// broken one can be removed.
	if _, _, err := e.Store.Delete(t.Context(), e.vres, "", "down-fail", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the configuration of a broken webhook: %v", err)
	}
	e.waitHooks(t, func(s *hookSet) bool { return !hasHook(s.validating, "down-fail") })

	// A slow webhook: its timeout ends the call, not the request's.
	release := make(chan struct{})
	defer close(release)
	e.hs.on("/slow", func(r *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		select {
		case <-release:
		case <-time.After(20 * time.Second):
		}
		return &admissionv1.AdmissionResponse{Allowed: true}
	})
	one := int32(1)
	e.validating(t, "slow", admissionregistrationv1.ValidatingWebhook{Name: "slow.example.com", TimeoutSeconds: &one,
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: e.hs.url("/slow"), CABundle: e.hs.ca},
		Rules:        rules(createUpdate, "", "v1", "configmaps")})
	start := time.Now()
	_, err = e.createCM(t.Context(), "slow", nil)
	if took := time.Since(start); !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "deadline exceeded") || took > 10*time.Second {
		t.Fatalf("a webhook slower than its timeout of 1s: %v after %v", err, took)
	}
}

func TestWebhookSelectorsAndService(t *testing.T) {
	e := newEnv(t)
	nsRes := kit.MustLookup(e.Store, corev1.SchemeGroupVersion.WithResource("namespaces"))
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "watched", Labels: map[string]string{"hooks": "on"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
	} {
		if _, err := e.Store.Create(t.Context(), nsRes, "", ns, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The webhook as a Service: its EndpointSlice names a pod's address,
	// which the client's dialer takes to the server.
	_, portStr, _ := net.SplitHostPort(strings.TrimPrefix(e.hs.srv.URL, "https://"))
	port, _ := strconv.Atoi(portStr)
	var dialed []string
	var mu sync.Mutex
	e.d.client.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		return (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:"+portStr)
	}
	svcRes := kit.MustLookup(e.Store, corev1.SchemeGroupVersion.WithResource("services"))
	esRes := kit.MustLookup(e.Store, discoveryv1.SchemeGroupVersion.WithResource("endpointslices"))
	if _, err := e.Store.Create(t.Context(), svcRes, "default", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: "default"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 8443, Protocol: corev1.ProtocolTCP}}}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	name, p32, ready := "https", int32(port), true
	if _, err := e.Store.Create(t.Context(), esRes, "default", &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "hook-1", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "hook"}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &p32}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.42.7.9"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	svcPort, path := int32(8443), "/sel"
	e.validating(t, "sel", admissionregistrationv1.ValidatingWebhook{Name: "sel.example.com",
		ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: e.hs.ca,
			Service: &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "hook", Port: &svcPort, Path: &path}},
		Rules:             rules(createUpdate, "", "v1", "configmaps"),
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"hooks": "on"}},
		ObjectSelector:    &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "skip", Operator: metav1.LabelSelectorOpDoesNotExist}}}})
	mk := func(ns, name string, lbls map[string]string) {
		t.Helper()
		if _, err := e.Store.Create(t.Context(), e.cms, ns, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbls}}, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("watched", "sent", nil)
	mk("watched", "skipped", map[string]string{"skip": "yes"})
	mk("other", "elsewhere", nil)
	reqs := e.hs.requests("/sel")
	if len(reqs) != 1 || reqs[0].Name != "sent" || reqs[0].Namespace != "watched" {
		var got []string
		for _, r := range reqs {
			got = append(got, r.Namespace+"/"+r.Name)
		}
		t.Fatalf("the webhook got %v, want watched/sent alone (by the Service's endpoint, as hook.default.svc)", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "10.42.7.9:" + portStr; len(dialed) != 1 || dialed[0] != want {
		t.Errorf("dialed %v, want the endpoint %s", dialed, want)
	}
}

func TestWebhookDryRunAndMatchConditions(t *testing.T) {
	e := newEnv(t)
	e.validating(t, "dry", admissionregistrationv1.ValidatingWebhook{Name: "dry.example.com",
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: e.hs.url("/dry"), CABundle: e.hs.ca},
		Rules:        rules([]admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}, "", "v1", "configmaps")})
	if _, err := e.Store.Create(t.Context(), e.cms, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dry", Namespace: "default"}},
		registry.WriteOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	reqs := e.hs.requests("/dry")
	if len(reqs) != 1 || reqs[0].DryRun == nil || !*reqs[0].DryRun || !strings.Contains(string(reqs[0].Options.Raw), `"dryRun":["All"]`) {
		t.Fatalf("a dry run: %d reviews, want one marked dryRun with its CreateOptions", len(reqs))
	}
	// A delete is sent with the object as stored.
	if _, err := e.createCM(t.Context(), "gone", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Store.Delete(t.Context(), e.cms, "default", "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	reqs = e.hs.requests("/dry")
	last := reqs[len(reqs)-1]
	if last.Operation != admissionv1.Delete || len(last.Object.Raw) != 0 || !strings.Contains(string(last.OldObject.Raw), `"name":"gone"`) {
		t.Errorf("the delete's review: %s object %s old %s", last.Operation, last.Object.Raw, last.OldObject.Raw)
	}
	// matchConditions cannot be evaluated: failurePolicy Fail refuses.
	e.validating(t, "cel", admissionregistrationv1.ValidatingWebhook{Name: "cel.example.com",
		ClientConfig:    admissionregistrationv1.WebhookClientConfig{URL: e.hs.url("/cel"), CABundle: e.hs.ca},
		Rules:           rules(createUpdate, "", "v1", "configmaps"),
		MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "not-system", Expression: "!request.userInfo.username.startsWith('system:')"}}})
	if _, err := e.createCM(t.Context(), "cel", nil); !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "matchConditions") {
		t.Errorf("a webhook with matchConditions and failurePolicy Fail: %v", err)
	}
	if n := len(e.hs.requests("/cel")); n != 0 {
		t.Errorf("the webhook with matchConditions was called %d times", n)
	}
}
