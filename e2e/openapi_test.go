package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// everyKubectl lists kubectl 1.27 to 1.33 as bundled on these machines;
// without them the test fails in CI and skips elsewhere.
func everyKubectl(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, v := range []string{"1.27", "1.28", "1.29", "1.30", "1.31", "1.32", "1.33"} {
		p := "/usr/lib/google-cloud-sdk/bin/kubectl." + v
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("kubectl %s is required at %s", v, p)
			}
			t.Skipf("no kubectl %s on this machine", v)
		}
		out[v] = p
	}
	return out
}

const openAPIManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: registry.invalid/web:1
        ports:
        - containerPort: 80
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - port: 80
`

// openAPIClients checks what kubectl does with the OpenAPI documents, with
// every version from 1.27 (which reads /openapi/v2 as protobuf) to 1.33:
// explain of nested fields, apply, diff, create and edit with validation
// on, an unknown field refused by name, an unknown kind named.
func openAPIClients(t *testing.T, bin string, c *storeCluster) {
	for v, kubectl := range everyKubectl(t) {
		t.Run(v, func(t *testing.T) {
			k := newKubectlBin(t, bin, c.members[0], kubectl)
			ns := "openapi-" + strings.ReplaceAll(v, ".", "-")
			k.ok(t, "create", "namespace", ns)
			defer k.run("", "delete", "namespace", ns, "--wait=false")

			mustMatch(t, "explain", k.ok(t, "explain", "deployments.spec.template.spec.containers.ports"),
				`(?m)^KIND: +Deployment`, `(?m)^FIELD: +ports <\[\]ContainerPort>`, `List of ports to expose from the container`,
				`containerPort\s+<integer> -required-`, `Number of port to expose on the pod's IP address`)
			mustMatch(t, "explain a status field", k.ok(t, "explain", "pods.status.conditions.lastTransitionTime"),
				`FIELD: +lastTransitionTime <(string|Time)>`)
			if v == "1.27" || v == "1.28" {
				mustMatch(t, "explain from /openapi/v2", k.ok(t, "explain", "services.spec.ports", "--output=plaintext-openapiv2"),
					`RESOURCE: +ports <\[\]Object>`, `The list of ports that are exposed by this service`)
			}

			dir := t.TempDir()
			manifest := filepath.Join(dir, "web.yaml")
			write := func(path, s string) {
				if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			write(manifest, openAPIManifest)
			mustMatch(t, "apply", k.ok(t, "apply", "-n", ns, "-f", manifest), `deployment.apps/web created`, `service/web created`)
			mustMatch(t, "apply again", k.ok(t, "apply", "-n", ns, "-f", manifest), `deployment.apps/web unchanged`)
			// No difference: exit 0. The controllers write the
			// Deployment's status for a moment after its creation, and a
			// write between diff's read and its dry run shows as one.
			for try := 1; ; try++ {
				out, errOut, err := k.run("", "diff", "-n", ns, "-f", manifest)
				if err == nil {
					break
				}
				if try == 10 {
					t.Fatalf("diff of the applied manifest, 10 tries: %v (want exit 0)\n%s%s", err, out, errOut)
				}
				time.Sleep(time.Second)
			}
			changed := filepath.Join(dir, "changed.yaml")
			write(changed, strings.Replace(openAPIManifest, "replicas: 1", "replicas: 2", 1))
			out, errOut, err := k.run("", "diff", "-n", ns, "-f", changed)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("diff of a change: %v (want exit 1)\n%s%s", err, out, errOut)
			}
			mustMatch(t, "diff", out, `(?m)^-  replicas: 1$`, `(?m)^\+  replicas: 2$`)

			bogus := filepath.Join(dir, "bogus.yaml")
			write(bogus, strings.Replace(openAPIManifest, "  replicas: 1", "  replicas: 1\n  bogus: 1", 1))
			if out, errOut, err := k.run("", "apply", "-n", ns, "-f", bogus); err == nil || !strings.Contains(errOut, `unknown field "spec.bogus"`) {
				t.Fatalf("apply of an unknown field: %v\n%s%s", err, out, errOut)
			}
			mixed := filepath.Join(dir, "mixed.yaml")
			write(mixed, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\ndata: {a: b}\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n")
			out, errOut, err = k.run("", "create", "-n", ns, "-f", mixed)
			if err == nil || !regexp.MustCompile(`no matches for kind "Widget" in version "example.com/v1"`).MatchString(errOut) ||
				!strings.Contains(out, "configmap/good created") {
				t.Fatalf("create of a file with an unknown kind: %v\n%s%s", err, out, errOut)
			}

			// Server-side apply: the tutorial's manifests, twice; a
			// conflict with another manager, then forced; the move of an
			// object made by client-side apply.
			hello, err := filepath.Abs("../deploy/examples/hello.yaml")
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				mustMatch(t, "apply --server-side", k.ok(t, "apply", "--server-side", "-n", ns, "-f", hello),
					`deployment.apps/hello serverside-applied`, `service/hello serverside-applied`, `ingress.networking.k8s.io/hello serverside-applied`,
					`persistentvolumeclaim/hello-data serverside-applied`, `horizontalpodautoscaler.autoscaling/hello serverside-applied`)
			}
			k.ok(t, "-n", ns, "patch", "deploy", "hello", "--field-manager=ops", "-p", `{"spec":{"minReadySeconds":5}}`)
			data, err := os.ReadFile(hello)
			if err != nil {
				t.Fatal(err)
			}
			conflicting := strings.Replace(string(data), "  replicas: 3\n", "  replicas: 3\n  minReadySeconds: 1\n", 1)
			if out, err := k.cmd(conflicting, "apply", "--server-side", "-n", ns, "-f", "-").CombinedOutput(); err == nil || !strings.Contains(string(out), `conflict with "ops" using apps/v1: .spec.minReadySeconds`) {
				t.Fatalf("apply of a field another manager owns: %v\n%s", err, out)
			}
			if out, err := k.cmd(conflicting, "apply", "--server-side", "--force-conflicts", "-n", ns, "-f", "-").CombinedOutput(); err != nil {
				t.Fatalf("apply --force-conflicts: %v\n%s", err, out)
			}
			if got := k.ok(t, "-n", ns, "get", "deploy", "hello", "-o", "jsonpath={.spec.minReadySeconds}"); got != "1" {
				t.Fatalf("minReadySeconds after a forced apply: %q", got)
			}
			// web was made by client-side apply: server-side apply takes
			// it over without conflicts, and client-side apply still works.
			mustMatch(t, "apply --server-side after apply", k.ok(t, "apply", "--server-side", "-n", ns, "-f", changed), `deployment.apps/web serverside-applied`)
			mustMatch(t, "managers", k.ok(t, "-n", ns, "get", "deploy", "web", "--show-managed-fields", "-o", "jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation} {end}"),
				`\bkubectl/Apply\b`)
			mustMatch(t, "apply after apply --server-side", k.ok(t, "apply", "-n", ns, "-f", manifest), `deployment.apps/web configured`)
			if got := k.ok(t, "-n", ns, "get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"); got != "1" {
				t.Fatalf("replicas after client-side apply: %q", got)
			}

			editor := filepath.Join(dir, "editor.sh")
			if err := os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/a: b/a: edited/' \"$1\"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := k.cmd("", "edit", "-n", ns, "configmap", "good")
			cmd.Env = append(cmd.Env, "EDITOR="+editor)
			if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "edited") {
				t.Fatalf("edit: %v %s", err, out)
			}
			if got := k.ok(t, "get", "-n", ns, "configmap", "good", "-o", "jsonpath={.data.a}"); got != "edited" {
				t.Fatalf("after edit: %q", got)
			}
		})
	}
}
