package openapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Resource is what the documents say of one served resource.
type Resource struct {
	schema.GroupVersionResource
	Kind       string
	Namespaced bool
	// Model and ListModel name the models of the kind and its list.
	Model, ListModel string
	// Subresources with the kind's own schema ("status"); Scale: a scale
	// subresource.
	Subresources []string
	Scale        bool
	// Verbs are discovery's: which operations there are.
	Verbs []string
	// Custom: a CRD's kind, which takes no strategic merge patch (kubectl
	// sends it a merge patch when its PATCH says so).
	Custom bool
	// Defs, for a kind whose models are not among the Models given to
	// Build (a CRD's), returns them as the v2 or v3 document writes them
	// (SchemaJSON); they may refer to those given.
	Defs func(v3 bool) map[string]map[string]any
}

// Documents are the served OpenAPI documents, each gzipped: they are
// built once and kept compressed, as most clients take them so.
type Documents struct {
	V2JSON  Doc
	V2Proto Doc
	// V3 is the document of each group version by its path ("api/v1",
	// "apis/apps/v1"); V3Index lists them with their hashes.
	V3      map[string]Doc
	V3Index Doc
}

// Doc is one document, gzipped, and its hash (an ETag, and the hash
// kubectl caches /openapi/v3 documents by).
type Doc struct {
	Gzip []byte
	Hash string
}

// obj is a JSON object of a document. The documents are written as trees
// of them (encoding/json orders their keys), not with kube-openapi's
// document types, whose JSON encoders would cost the binary a quarter of
// a megabyte.
type obj = map[string]any

// Build writes the documents of the resources served with the models.
func Build(models Models, resources []Resource, version string) (*Documents, error) {
	info := obj{"title": "Kubernetes", "version": version}
	v2Paths := map[string]obj{}
	var v2Refs []string
	type gvDoc struct {
		paths  map[string]obj
		refs   []string
		custom []Resource
	}
	var customs []Resource
	byGV := map[string]*gvDoc{}
	var keys []string
	for _, r := range resources {
		key := "apis/" + r.GroupVersion().String()
		if r.Group == "" {
			key = "api/" + r.Version
		}
		d := byGV[key]
		if d == nil {
			d = &gvDoc{paths: map[string]obj{}}
			byGV[key] = d
			keys = append(keys, key)
		}
		ps, refs := paths(r, false)
		for p, item := range ps {
			v2Paths[p] = item
		}
		v2Refs = append(v2Refs, refs...)
		if r.Defs != nil {
			d.custom = append(d.custom, r)
			customs = append(customs, r)
		}
		ps, _ = paths(r, true)
		for p, item := range ps {
			d.paths[p] = item
		}
		d.refs = append(d.refs, refs...)
	}
	docs := &Documents{V3: map[string]Doc{}}
	v2 := obj{"swagger": "2.0", "info": info, "paths": v2Paths, "definitions": withCustom(models, v2Refs, customs, false)}
	b, err := json.Marshal(v2)
	if err != nil {
		return nil, fmt.Errorf("openapi: v2: %w", err)
	}
	if docs.V2JSON, err = newDoc(b); err != nil {
		return nil, err
	}
	if docs.V2Proto, err = newDoc(encodeV2(v2)); err != nil {
		return nil, err
	}
	type ref struct {
		ServerRelativeURL string `json:"serverRelativeURL"`
	}
	index := struct {
		Paths map[string]ref `json:"paths"`
	}{Paths: map[string]ref{}}
	sort.Strings(keys)
	for _, key := range keys {
		d := byGV[key]
		v3 := obj{"openapi": "3.0.0", "info": info, "paths": d.paths, "components": obj{"schemas": withCustom(models, d.refs, d.custom, true)}}
		b, err := json.Marshal(v3)
		if err != nil {
			return nil, fmt.Errorf("openapi: v3 %s: %w", key, err)
		}
		doc, err := newDoc(b)
		if err != nil {
			return nil, err
		}
		docs.V3[key] = doc
		index.Paths[key] = ref{ServerRelativeURL: "/openapi/v3/" + key + "?hash=" + doc.Hash}
	}
	b, _ = json.Marshal(index)
	if docs.V3Index, err = newDoc(b); err != nil {
		return nil, err
	}
	return docs, nil
}

func newDoc(b []byte) (Doc, error) {
	sum := sha512.Sum512(b)
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		return Doc{}, fmt.Errorf("openapi: compress: %w", err)
	}
	if err := zw.Close(); err != nil {
		return Doc{}, fmt.Errorf("openapi: compress: %w", err)
	}
	return Doc{Gzip: buf.Bytes(), Hash: strings.ToUpper(hex.EncodeToString(sum[:]))}, nil
}

// closure returns the named models, and those they refer to, as the v2 or
// v3 document writes them.
func closure(models Models, names []string, v3 bool) map[string]obj {
	defs := map[string]obj{}
	var visit func(s *spec.Schema)
	add := func(name string) {
		if _, ok := defs[name]; ok {
			return
		}
		if m, ok := models[name]; ok {
			defs[name] = SchemaJSON(m, v3)
			visit(m)
		}
	}
	visit = func(s *spec.Schema) {
		if s == nil {
			return
		}
		if ref := s.Ref.String(); ref != "" {
			add(strings.TrimPrefix(ref, v2Prefix))
			return
		}
		for _, p := range s.Properties {
			visit(&p)
		}
		if s.Items != nil {
			visit(s.Items.Schema)
		}
		if s.AdditionalProperties != nil {
			visit(s.AdditionalProperties.Schema)
		}
		for i := range s.AllOf {
			visit(&s.AllOf[i])
		}
	}
	for _, name := range names {
		add(name)
	}
	return defs
}

// withCustom returns the closure of the named models with the custom
// resources' own models and the models those refer to.
func withCustom(models Models, names []string, custom []Resource, v3 bool) map[string]obj {
	var defs []map[string]map[string]any
	for _, r := range custom {
		d := r.Defs(v3)
		defs = append(defs, d)
		for _, def := range d {
			names = append(names, refsOf(def, v3)...)
		}
	}
	out := closure(models, names, v3)
	for _, d := range defs {
		for name, def := range d {
			out[name] = def
		}
	}
	return out
}

// refsOf returns the model names a JSON schema refers to.
func refsOf(v any, v3 bool) []string {
	prefix := v2Prefix
	if v3 {
		prefix = v3Prefix
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				out = append(out, strings.TrimPrefix(ref, prefix))
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		case []map[string]any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	return out
}

// Where the documents' references point.
const (
	v2Prefix = "#/definitions/"
	v3Prefix = "#/components/schemas/"
)

// schemaJSON writes a model's schema for a v2 or v3 document: in v3 a
// reference with a description beside it goes in allOf, as kube-apiserver
// writes it (v3 ignores what is beside a $ref).
func SchemaJSON(s *spec.Schema, v3 bool) obj {
	o := obj{}
	if ref := s.Ref.String(); ref != "" {
		ref = strings.TrimPrefix(ref, v2Prefix)
		if !v3 {
			o["$ref"] = v2Prefix + ref
		} else if s.Description == "" {
			o["$ref"] = v3Prefix + ref
		} else {
			o["allOf"] = []obj{{"$ref": v3Prefix + ref}}
		}
	}
	set := func(k string, v any, ok bool) {
		if ok {
			o[k] = v
		}
	}
	set("description", s.Description, s.Description != "")
	if len(s.Type) == 1 {
		o["type"] = s.Type[0]
	} else if len(s.Type) > 1 {
		o["type"] = []string(s.Type)
	}
	set("format", s.Format, s.Format != "")
	set("required", s.Required, len(s.Required) > 0)
	set("enum", s.Enum, len(s.Enum) > 0)
	set("default", s.Default, s.Default != nil)
	set("nullable", s.Nullable, s.Nullable && v3)
	set("pattern", s.Pattern, s.Pattern != "")
	if s.Maximum != nil {
		o["maximum"] = *s.Maximum
	}
	if s.Minimum != nil {
		o["minimum"] = *s.Minimum
	}
	set("exclusiveMaximum", true, s.ExclusiveMaximum)
	set("exclusiveMinimum", true, s.ExclusiveMinimum)
	for k, v := range map[string]*int64{"maxLength": s.MaxLength, "minLength": s.MinLength, "maxItems": s.MaxItems,
		"minItems": s.MinItems, "maxProperties": s.MaxProperties, "minProperties": s.MinProperties} {
		if v != nil {
			o[k] = *v
		}
	}
	set("uniqueItems", true, s.UniqueItems)
	if s.Items != nil && s.Items.Schema != nil {
		o["items"] = SchemaJSON(s.Items.Schema, v3)
	}
	if len(s.Properties) > 0 {
		props := obj{}
		for name, p := range s.Properties {
			props[name] = SchemaJSON(&p, v3)
		}
		o["properties"] = props
	}
	if ap := s.AdditionalProperties; ap != nil {
		if ap.Schema != nil {
			o["additionalProperties"] = SchemaJSON(ap.Schema, v3)
		} else {
			o["additionalProperties"] = ap.Allows
		}
	}
	if len(s.AllOf) > 0 && o["allOf"] == nil {
		all := make([]obj, len(s.AllOf))
		for i := range s.AllOf {
			all[i] = SchemaJSON(&s.AllOf[i], v3)
		}
		o["allOf"] = all
	}
	for k, v := range s.Extensions {
		o[k] = v
	}
	return o
}

// The meta models every document refers to.
const (
	statusModel        = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
	deleteOptionsModel = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
	patchModel         = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
	scaleModel         = "io.k8s.api.autoscaling.v1.Scale"
)

// The patch types the server takes, and the types it answers in.
var (
	patchTypes = []string{"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"}
	mediaTypes = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf"}
)

// paths returns the resource's paths and operations for a v2 or v3
// document, as kube-apiserver describes them: each operation with its
// action, its group-version-kind and its query parameters
// (fieldValidation among them: kubectl validates on the client only for
// kinds whose PATCH lacks it); and the models they refer to.
func paths(r Resource, v3 bool) (map[string]obj, []string) {
	prefix := "/apis/" + r.GroupVersion().String()
	if r.Group == "" {
		prefix = "/api/" + r.Version
	}
	collection := prefix + "/" + r.Resource
	nameParam := param(v3, "path", "name", "string", "name of the "+r.Kind)
	var nsParams []obj
	if r.Namespaced {
		collection = prefix + "/namespaces/{namespace}/" + r.Resource
		nsParams = []obj{param(v3, "path", "namespace", "string", "object name and auth scope, such as for teams and projects")}
	}
	itemParams := append([]obj{nameParam}, nsParams...)
	refs := []string{r.Model, statusModel}
	ref := func(model string) obj {
		if v3 {
			return obj{"$ref": v3Prefix + model}
		}
		return obj{"$ref": v2Prefix + model}
	}
	op := func(action, verb, sub string, resp string, params ...obj) obj {
		gvk := obj{"group": r.Group, "version": r.Version, "kind": r.Kind}
		if resp == scaleModel {
			gvk = obj{"group": "autoscaling", "version": "v1", "kind": "Scale"}
		}
		group := strings.Split(r.Group, ".")[0]
		if group == "" {
			group = "core"
		}
		ns := ""
		if r.Namespaced {
			ns = "Namespaced"
		}
		o := obj{
			"operationId":                     verb + upper(group) + upper(r.Version) + ns + r.Kind + upper(sub),
			"tags":                            []string{group + "_" + r.Version},
			"x-kubernetes-action":             action,
			"x-kubernetes-group-version-kind": gvk,
		}
		var body obj
		for _, p := range params {
			if p["in"] == "body" {
				body = p
				continue
			}
			o["parameters"] = append(asList(o["parameters"]), p)
		}
		ok := obj{"description": "OK"}
		if v3 {
			content := obj{}
			for _, mt := range mediaTypes {
				content[mt] = obj{"schema": ref(resp)}
			}
			ok["content"] = content
			if body != nil {
				types := mediaTypes
				if action == "patch" {
					types = r.patchTypes()
				}
				content := obj{}
				for _, mt := range types {
					content[mt] = obj{"schema": body["schema"]}
				}
				o["requestBody"] = obj{"required": true, "content": content}
			}
		} else {
			ok["schema"] = ref(resp)
			o["produces"] = mediaTypes
			o["schemes"] = []string{"https"}
			if body != nil {
				o["parameters"] = append(asList(o["parameters"]), body)
				o["consumes"] = []string{"*/*"}
				if action == "patch" {
					o["consumes"] = r.patchTypes()
				}
			}
		}
		o["responses"] = obj{"200": ok, "401": obj{"description": "Unauthorized"}}
		return o
	}
	q := func(name, typ, desc string) obj { return param(v3, "query", name, typ, desc) }
	dryRun := q("dryRun", "string", "When present, indicates that modifications should not be persisted.")
	manager := q("fieldManager", "string", "fieldManager is a name associated with the actor or entity that is making these changes.")
	validation := q("fieldValidation", "string", "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn and Strict (the default).")
	force := q("force", "boolean", "Force is going to \"force\" Apply requests: the request is re-acquiring conflicting fields owned by other people.")
	body := func(model string) obj {
		refs = append(refs, model)
		return obj{"name": "body", "in": "body", "required": true, "schema": ref(model)}
	}
	write := func(action, verb, sub, model string) obj {
		return op(action, verb, sub, model, body(model), dryRun, manager, validation)
	}
	patch := func(sub, model string) obj {
		return op("patch", "patch", sub, model, body(patchModel), dryRun, manager, validation, force)
	}
	has := func(verb string) bool { return slices.Contains(r.Verbs, verb) }
	out := map[string]obj{}
	list := obj{}
	if has("list") {
		refs = append(refs, r.ListModel)
		list["get"] = op("list", "list", "", r.ListModel,
			q("labelSelector", "string", "A selector to restrict the list of returned objects by their labels."),
			q("fieldSelector", "string", "A selector to restrict the list of returned objects by their fields."),
			q("limit", "integer", "limit is a maximum number of responses to return for a list call."),
			q("continue", "string", "The continue option should be set when retrieving more results from the server."),
			q("watch", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications."))
	}
	if has("create") {
		list["post"] = write("post", "create", "", r.Model)
	}
	if has("deletecollection") {
		list["delete"] = op("deletecollection", "deleteCollection", "", statusModel, body(deleteOptionsModel), dryRun)
	}
	if len(list) > 0 {
		if len(nsParams) > 0 {
			list["parameters"] = nsParams
		}
		out[collection] = list
	}
	item := obj{}
	if has("get") {
		item["get"] = op("get", "read", "", r.Model)
	}
	if has("update") {
		item["put"] = write("put", "replace", "", r.Model)
	}
	if has("patch") {
		item["patch"] = patch("", r.Model)
	}
	if has("delete") {
		item["delete"] = op("delete", "delete", "", statusModel, body(deleteOptionsModel), dryRun)
	}
	if len(item) > 0 {
		item["parameters"] = itemParams
		out[collection+"/{name}"] = item
	}
	subs := map[string]string{}
	for _, s := range r.Subresources {
		subs[s] = r.Model
	}
	if r.Scale {
		subs["scale"] = scaleModel
		refs = append(refs, scaleModel)
	}
	for sub, model := range subs {
		out[collection+"/{name}/"+sub] = obj{"parameters": itemParams,
			"get":   op("get", "read", sub, model),
			"put":   write("put", "replace", sub, model),
			"patch": patch(sub, model),
		}
	}
	return out, refs
}

// patchTypes are the patch types the resource takes.
func (r Resource) patchTypes() []string {
	if r.Custom {
		return slices.DeleteFunc(slices.Clone(patchTypes), func(t string) bool { return t == "application/strategic-merge-patch+json" })
	}
	return patchTypes
}

// param is a path or query parameter of a simple type.
func param(v3 bool, in, name, typ, desc string) obj {
	p := obj{"name": name, "in": in, "description": desc}
	if in == "path" {
		p["required"] = true
	}
	if v3 {
		p["schema"] = obj{"type": typ}
	} else {
		p["type"] = typ
	}
	return p
}

func asList(v any) []obj {
	l, _ := v.([]obj)
	return l
}

func upper(s string) string {
	if s == "" {
		return ""
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
