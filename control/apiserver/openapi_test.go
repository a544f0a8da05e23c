package apiserver_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/kube-openapi/pkg/spec3"
	openapiproto "k8s.io/kube-openapi/pkg/util/proto"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"

	"github.com/isle-cluster/isle/control/registry"
)

// v3Docs fetches the /openapi/v3 index and every document it lists,
// checking each hash.
func v3Docs(t *testing.T, e *env) map[string]*spec3.OpenAPI {
	t.Helper()
	var index struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	mustCode(t, e.admin(t, "GET", "/openapi/v3", ""), 200).decode(t, &index)
	docs := map[string]*spec3.OpenAPI{}
	for key, ref := range index.Paths {
		u, err := url.Parse(ref.ServerRelativeURL)
		if err != nil || u.Path != "/openapi/v3/"+key || u.Query().Get("hash") == "" {
			t.Fatalf("serverRelativeURL %q", ref.ServerRelativeURL)
		}
		r := mustCode(t, e.admin(t, "GET", ref.ServerRelativeURL, ""), 200)
		sum := sha512.Sum512(r.body)
		if h := u.Query().Get("hash"); !strings.EqualFold(h, hex.EncodeToString(sum[:])) {
			t.Errorf("%s: hash %s is not the document's SHA-512", key, h)
		}
		if cc := r.header.Get("Cache-Control"); cc != "public, immutable" {
			t.Errorf("%s: Cache-Control %q for a hashed URL", key, cc)
		}
		d := &spec3.OpenAPI{}
		if err := d.UnmarshalJSON(r.body); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		docs[key] = d
	}
	return docs
}

// TestOpenAPIV3 checks that every served kind has its schema, with its
// group-version-kind, and a PATCH operation taking fieldValidation (from
// which kubectl learns that the server validates), and that schemas
// resolve down to nested fields with descriptions (kubectl explain).
func TestOpenAPIV3(t *testing.T) {
	e := newEnv(t)
	docs := v3Docs(t, e)
	// Every resource discovery lists (the registry's, the reviews, the
	// metrics) has its schema; every one that can be patched, its PATCH.
	var groups metav1.APIGroupList
	mustCode(t, e.admin(t, "GET", "/apis", ""), 200).decode(t, &groups)
	keys := []string{"api/v1"}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			keys = append(keys, "apis/"+v.GroupVersion)
		}
	}
	for _, key := range keys {
		var list metav1.APIResourceList
		mustCode(t, e.admin(t, "GET", "/"+key, ""), 200).decode(t, &list)
		gv, _ := schema.ParseGroupVersion(list.GroupVersion)
		d := docs[key]
		if d == nil {
			t.Errorf("no document %s", key)
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			found := false
			for _, s := range d.Components.Schemas {
				gvks, _ := s.Extensions["x-kubernetes-group-version-kind"].([]any)
				for _, g := range gvks {
					m, _ := g.(map[string]any)
					found = found || (m["group"] == gv.Group && m["version"] == gv.Version && m["kind"] == r.Kind)
				}
			}
			if !found {
				t.Errorf("%s %s: no schema with its group-version-kind", key, r.Name)
			}
			if !slices.Contains(r.Verbs, "patch") {
				continue
			}
			p := "/" + key + "/" + r.Name + "/{name}"
			if r.Namespaced {
				p = "/" + key + "/namespaces/{namespace}/" + r.Name + "/{name}"
			}
			item := d.Paths.Paths[p]
			if item == nil || item.Patch == nil {
				t.Errorf("%s %s: no PATCH at %s", key, r.Name, p)
				continue
			}
			gvk, _ := item.Patch.Extensions["x-kubernetes-group-version-kind"].(map[string]any)
			if item.Patch.Extensions["x-kubernetes-action"] != "patch" || gvk["kind"] != r.Kind || gvk["version"] != gv.Version || gvk["group"] != gv.Group {
				t.Errorf("%s: PATCH %v", p, item.Patch.Extensions)
			}
			hasFV := false
			for _, prm := range item.Patch.Parameters {
				hasFV = hasFV || (prm.Name == "fieldValidation" && prm.In == "query")
			}
			if !hasFV {
				t.Errorf("PATCH %s has no fieldValidation query parameter", p)
			}
		}
	}

	// kubectl explain deployments.spec.template.spec.containers.ports:
	// each step is a property, through allOf references.
	d := docs["apis/apps/v1"]
	schemaAt := func(path ...string) *spec.Schema {
		t.Helper()
		s := d.Components.Schemas["io.k8s.api.apps.v1.Deployment"]
		for _, name := range path {
			p, ok := s.Properties[name]
			if !ok {
				t.Fatalf("%v: no property %s", path, name)
			}
			if p.Description == "" {
				t.Errorf("%v: %s has no description", path, name)
			}
			if p.Items != nil {
				p = *p.Items.Schema
			}
			ref := p.Ref.String()
			if len(p.AllOf) == 1 {
				ref = p.AllOf[0].Ref.String()
			}
			if ref == "" {
				return &p
			}
			s = d.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
			if s == nil {
				t.Fatalf("%v: %s refers to %s, not in the document", path, name, ref)
			}
		}
		return s
	}
	port := schemaAt("spec", "template", "spec", "containers", "ports")
	if port.Properties["containerPort"].Type[0] != "integer" || port.Properties["containerPort"].Format != "int32" {
		t.Errorf("containerPort: %+v", port.Properties["containerPort"].SchemaProps)
	}
	if len(port.Required) != 1 || port.Required[0] != "containerPort" {
		t.Errorf("ContainerPort required %v", port.Required)
	}
	if s := schemaAt("spec", "template", "metadata", "creationTimestamp"); s.Format != "date-time" {
		t.Errorf("creationTimestamp: %+v", s.SchemaProps)
	}

	t.Run("errors", func(t *testing.T) {
		mustCode(t, e.admin(t, "GET", "/openapi/v3/apis/nope/v1", ""), 404)
		mustCode(t, e.do(t, req{path: "/openapi/v3"}), 401)
		mustCode(t, e.do(t, req{path: "/openapi/v2"}), 401)
	})
}

// TestOpenAPIV2 reads /openapi/v2 as kubectl 1.27 and 1.28 do: protobuf,
// parsed into models, strategic merge patch metadata taken from them.
func TestOpenAPIV2(t *testing.T) {
	e := newEnv(t)
	const protoType = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	// kubectl 1.27 asks by the older name, with an "@"; later ones by both.
	for _, accept := range []string{"application/com.github.proto-openapi.spec.v2@v1.0+protobuf", protoType + ", application/json",
		"application/json;q=0.5, " + protoType} {
		r := mustCode(t, e.admin(t, "GET", "/openapi/v2", "", "Accept", accept), 200)
		if ct := r.header.Get("Content-Type"); ct != protoType {
			t.Fatalf("Accept %s: Content-Type %q", accept, ct)
		}
	}
	for _, accept := range []string{"application/json, " + protoType, protoType + ";q=0.1, */*", ""} {
		r := mustCode(t, e.admin(t, "GET", "/openapi/v2", "", "Accept", accept), 200)
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Accept %s: Content-Type %q", accept, ct)
		}
	}
	r := mustCode(t, e.admin(t, "GET", "/openapi/v2", "", "Accept", protoType), 200)
	doc := &openapi_v2.Document{}
	if err := proto.Unmarshal(r.body, doc); err != nil {
		t.Fatal(err)
	}
	j := mustCode(t, e.admin(t, "GET", "/openapi/v2", ""), 200)
	if ct := j.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	fromJSON, err := openapi_v2.ParseDocument(j.body)
	if err != nil {
		t.Fatal(err)
	}
	// gnostic keeps extensions as YAML text: compare what it says.
	canonicalAny(t, doc.ProtoReflect())
	canonicalAny(t, fromJSON.ProtoReflect())
	if !proto.Equal(doc, fromJSON) {
		a, _ := protojson.Marshal(doc)
		b, _ := protojson.Marshal(fromJSON)
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Fatalf("the protobuf document is not the JSON one; at byte %d:\n%s\nnot\n%s", i, a[max(0, i-300):min(len(a), i+300)], b[max(0, i-300):min(len(b), i+300)])
			}
		}
		t.Fatalf("the protobuf document is not the JSON one (%d and %d bytes as JSON)", len(a), len(b))
	}

	models, err := openapiproto.NewOpenAPIData(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range registry.Table() {
		name := "io.k8s.api." + strings.Split(r.Group, ".")[0] + "." + r.Version + "." + r.Kind
		if r.Group == "" {
			name = "io.k8s.api.core." + r.Version + "." + r.Kind
		}
		if models.LookupModel(name) == nil {
			t.Errorf("%s: no model %s", r, name)
		}
	}
	pod, ok := models.LookupModel("io.k8s.api.core.v1.Pod").(*openapiproto.Kind)
	if !ok {
		t.Fatal("Pod is not a Kind")
	}
	// What kubectl apply (client-side) merges lists of a pod by.
	meta := strategicpatch.NewPatchMetaFromOpenAPI(pod)
	podSpec, _, err := meta.LookupPatchMetadataForStruct("spec")
	if err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{"containers": "name merge", "volumes": "name merge,retainKeys", "tolerations": " "} {
		_, pm, err := podSpec.LookupPatchMetadataForSlice(field)
		if err != nil {
			t.Fatal(err)
		}
		if got := pm.GetPatchMergeKey() + " " + strings.Join(pm.GetPatchStrategies(), ","); got != want {
			t.Errorf("spec.%s: merge key %q strategies %v", field, pm.GetPatchMergeKey(), pm.GetPatchStrategies())
		}
	}
}

// canonicalAny rewrites the YAML of every Any in m as JSON.
func canonicalAny(t *testing.T, m protoreflect.Message) {
	if m.Descriptor().FullName() == "openapi.v2.Any" {
		f := m.Descriptor().Fields().ByName("yaml")
		j, err := yaml.YAMLToJSON([]byte(m.Get(f).String()))
		if err != nil {
			t.Fatal(err)
		}
		m.Set(f, protoreflect.ValueOfString(string(j)))
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				canonicalAny(t, v.List().Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsMap():
			canonicalAny(t, v.Message())
		}
		return true
	})
}

// TestOpenAPIEncoding: gzip for clients that take it, plain otherwise,
// and 304 for a document a client has.
func TestOpenAPIEncoding(t *testing.T) {
	e := newEnv(t)
	plain := mustCode(t, e.admin(t, "GET", "/openapi/v2", "", "Accept-Encoding", "identity"), 200)
	if plain.header.Get("Content-Encoding") != "" || !json.Valid(plain.body) {
		t.Fatalf("identity: Content-Encoding %q, %d bytes", plain.header.Get("Content-Encoding"), len(plain.body))
	}
	zipped := mustCode(t, e.admin(t, "GET", "/openapi/v2", "", "Accept-Encoding", "gzip"), 200)
	if zipped.header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("gzip: Content-Encoding %q", zipped.header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(zipped.body))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(unzipped, plain.body) {
		t.Fatalf("gzipped document differs (%v)", err)
	}
	t.Logf("/openapi/v2: %d bytes, %d gzipped", len(plain.body), len(zipped.body))
	etag := plain.header.Get("Etag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	mustCode(t, e.admin(t, "GET", "/openapi/v2", "", "If-None-Match", etag), 304)
}
