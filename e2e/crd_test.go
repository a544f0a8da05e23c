package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// gatewayAPI is the public project whose CRDs the test installs: the
// Gateway API's standard channel, fetched as a Go module.
const gatewayAPI = "sigs.k8s.io/gateway-api@v1.6.3"

// moduleDir downloads a module (checked against the checksum database)
// and returns its directory.
func moduleDir(t *testing.T, mod string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	var m struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &m)
	}
	if err != nil || m.Error != "" || m.Dir == "" {
		t.Fatalf("go mod download %s: %v %s", mod, err, m.Error)
	}
	return m.Dir
}

const gatewayObjects = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: isle}
spec: {controllerName: isle.dev/gateway}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web}
spec:
  gatewayClassName: isle
  listeners:
  - {name: http, protocol: HTTP, port: 80}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: hello}
spec:
  parentRefs: [{name: web}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs: [{name: hello, port: 80}]
`

// gatewayAPICRDs installs the Gateway API's CRDs with server-side apply,
// creates its objects (defaulted, validated, printed with the CRDs'
// columns), follows them with a client-go dynamic informer, and deletes a
// CRD with its objects.
func gatewayAPICRDs(t *testing.T, bin string, c *storeCluster) {
	k := newKubectl(t, bin, c.members[0])
	dir := filepath.Join(moduleDir(t, gatewayAPI), "config", "crd", "standard")
	files, err := filepath.Glob(filepath.Join(dir, "gateway.networking.k8s.io_*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("the Gateway API's CRDs: %v %v", files, err)
	}
	for _, f := range files {
		if strings.Contains(f, "_vap_") {
			continue // a ValidatingAdmissionPolicy, not a CRD
		}
		out, errOut, err := k.run("", "apply", "--server-side", "-f", f)
		if err != nil || !strings.Contains(out, "serverside-applied") {
			t.Fatalf("apply --server-side %s: %v\n%s%s", filepath.Base(f), err, out, errOut)
		}
		if strings.Contains(f, "httproutes") && !strings.Contains(errOut, "x-kubernetes-validations rules are stored but not enforced") {
			t.Errorf("no warning of the CEL rules not enforced: %s", errOut)
		}
	}
	k.ok(t, "wait", "--for=condition=Established", "--timeout=30s", "crd/gateways.gateway.networking.k8s.io", "crd/httproutes.gateway.networking.k8s.io", "crd/gatewayclasses.gateway.networking.k8s.io")
	ns := "gateway-test"
	k.ok(t, "create", "namespace", ns)

	// A dynamic informer follows the HTTPRoutes.
	kc, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	routes := schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, ns, nil)
	var mu sync.Mutex
	seen := map[string]int{}
	note := func(kind string) func(obj any) {
		return func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok && u.GetName() == "hello" {
				mu.Lock()
				seen[kind]++
				mu.Unlock()
			}
		}
	}
	inf := factory.ForResource(routes).Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: note("add"),
		UpdateFunc: func(_, obj any) { note("update")(obj) }, DeleteFunc: note("delete")}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}

	manifest := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(manifest, []byte(gatewayObjects), 0o600); err != nil {
		t.Fatal(err)
	}
	mustMatch(t, "apply", k.ok(t, "apply", "-n", ns, "-f", manifest), `gatewayclass.gateway.networking.k8s.io/isle created`,
		`gateway.gateway.networking.k8s.io/web created`, `httproute.gateway.networking.k8s.io/hello created`)
	mustMatch(t, "get with the CRDs' columns", k.ok(t, "get", "-n", ns, "gateways,gatewayclasses"),
		`NAME +CLASS +ADDRESS +PROGRAMMED +AGE`, `gateway.gateway.networking.k8s.io/web +isle +Unknown +\d+s`,
		`NAME +CONTROLLER +ACCEPTED +AGE`, `gatewayclass.gateway.networking.k8s.io/isle +isle.dev/gateway +Unknown`)
	// Defaults from the schema.
	if got := k.ok(t, "get", "-n", ns, "httproute", "hello", "-o", "jsonpath={.spec.rules[0].backendRefs[0].kind}/{.spec.rules[0].backendRefs[0].weight}/{.spec.parentRefs[0].kind}"); got != "Service/1/Gateway" {
		t.Errorf("defaults: %q", got)
	}
	// The schema's validation, and unknown fields, with their paths.
	bad := strings.Replace(gatewayObjects, "type: PathPrefix", "type: Prefixy", 1)
	if out, err := k.cmd(bad, "apply", "-n", ns, "-f", "-").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), `spec.rules[0].matches[0].path.type: Unsupported value: "Prefixy"`) {
		t.Errorf("an invalid route: %v\n%s", err, out)
	}
	unknown := strings.Replace(gatewayObjects, "  parentRefs: [{name: web}]", "  parentRefs: [{name: web}]\n  bogus: 1", 1)
	if out, err := k.cmd(unknown, "apply", "-n", ns, "-f", "-").CombinedOutput(); err == nil || !strings.Contains(string(out), `unknown field "spec.bogus"`) {
		t.Errorf("an unknown field: %v\n%s", err, out)
	}
	mustMatch(t, "explain", k.ok(t, "explain", "httproute.spec.rules.matches.path.type"), `ENUM:`, `PathPrefix`, `Type specifies how to match against the path Value`)
	mustMatch(t, "the category", k.ok(t, "get", "gateway-api", "-n", ns), `httproute.gateway.networking.k8s.io/hello`, `gateway.gateway.networking.k8s.io/web`)
	k.ok(t, "label", "-n", ns, "httproute", "hello", "tier=web")
	k.ok(t, "delete", "-n", ns, "httproute", "hello")
	waitFor(t, 10*time.Second, "the informer's add, update and delete", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["add"] == 1 && seen["update"] >= 1 && seen["delete"] == 1
	})

	// The garbage collector follows custom objects' owners: a route
	// owned by the Gateway goes with it.
	uid := k.ok(t, "get", "-n", ns, "gateway", "web", "-o", "jsonpath={.metadata.uid}")
	owned := strings.Replace(gatewayObjects[strings.Index(gatewayObjects, "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute"):],
		"metadata: {name: hello}", "metadata:\n  name: owned\n  ownerReferences: [{apiVersion: gateway.networking.k8s.io/v1, kind: Gateway, name: web, uid: "+uid+"}]", 1)
	if out, err := k.cmd(owned, "apply", "-n", ns, "-f", "-").CombinedOutput(); err != nil {
		t.Fatalf("apply of an owned route: %v\n%s", err, out)
	}
	k.ok(t, "get", "-n", ns, "httproute", "owned")
	k.ok(t, "delete", "-n", ns, "gateway", "web")
	waitFor(t, 30*time.Second, "the owned route collected", func() bool {
		_, _, err := k.run("", "get", "-n", ns, "httproute", "owned")
		return err != nil
	})

	// A namespace deleted takes the custom objects in it.
	k.ok(t, "apply", "-n", ns, "-f", manifest)
	k.ok(t, "delete", "namespace", ns, "--timeout=60s")
	if out := k.ok(t, "get", "httproutes,gateways", "-A", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("left after the namespace was deleted: %s", out)
	}

	// A CRD deleted takes its objects and its kind.
	k.ok(t, "create", "namespace", ns)
	k.ok(t, "apply", "-n", ns, "-f", manifest)
	k.ok(t, "delete", "crd", "httproutes.gateway.networking.k8s.io", "--timeout=30s")
	waitFor(t, 10*time.Second, "httproutes gone from discovery", func() bool {
		_, errOut, err := k.run("", "get", "httproutes", "-n", ns)
		// (kubectl's cached discovery may still name the kind: then the
		// server answers 404.)
		return err != nil && (strings.Contains(errOut, `the server doesn't have a resource type "httproutes"`) ||
			strings.Contains(errOut, "the server could not find the requested resource"))
	})
	k.ok(t, "get", "-n", ns, "gateway", "web")
}
