package registry

import (
	"bytes"
	"fmt"
	"strings"

	jsoniter "github.com/json-iterator/go"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	sigsjson "sigs.k8s.io/json"
)

// Scheme knows every served Go type and the meta types (options, Status,
// Table, watch events) of every served group version.
var Scheme = newScheme()

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, discoveryv1.AddToScheme,
		networkingv1.AddToScheme, autoscalingv1.AddToScheme, autoscalingv2.AddToScheme,
		storagev1.AddToScheme, coordinationv1.AddToScheme, policyv1.AddToScheme, metav1.AddMetaToScheme,
	} {
		if err := add(s); err != nil {
			panic("registry: build scheme: " + err.Error())
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	registerKinds(s, Table())
	return s
}

// registerKinds adds the kinds of resources that are Go types and not
// known yet to s.
func registerKinds(s *runtime.Scheme, resources []*Resource) {
	for _, r := range resources {
		obj := r.New()
		if _, ok := obj.(runtime.Unstructured); ok || s.Recognizes(r.GVK()) {
			continue
		}
		gv := r.GroupVersion()
		if !s.IsVersionRegistered(gv) {
			metav1.AddToGroupVersion(s, gv)
		}
		s.AddKnownTypeWithName(r.GVK(), obj)
		s.AddKnownTypeWithName(gv.WithKind(r.Kind+"List"), r.NewList())
	}
}

var codecs = serializer.NewCodecFactory(Scheme)

// Codecs decodes any type the scheme knows (options, Scale, Binding,
// Eviction) from JSON or YAML.
func Codecs() runtime.Decoder { return codecs.UniversalDeserializer() }

// FieldValidation is the server-side field validation mode.
type FieldValidation string

// Field validation modes (the fieldValidation query parameter).
const (
	FieldValidationStrict FieldValidation = "Strict"
	FieldValidationWarn   FieldValidation = "Warn"
	FieldValidationIgnore FieldValidation = "Ignore"
)

var (
	strictJSON = json.NewSerializerWithOptions(json.DefaultMetaFactory, Scheme, Scheme, json.SerializerOptions{Strict: true})
	laxJSON    = json.NewSerializerWithOptions(json.DefaultMetaFactory, Scheme, Scheme, json.SerializerOptions{})
	strictYAML = json.NewSerializerWithOptions(json.DefaultMetaFactory, Scheme, Scheme, json.SerializerOptions{Yaml: true, Strict: true})
	laxYAML    = json.NewSerializerWithOptions(json.DefaultMetaFactory, Scheme, Scheme, json.SerializerOptions{Yaml: true})
)

// Format is the encoding of a request body.
type Format int

// Request body formats.
const (
	FormatJSON Format = iota
	FormatYAML
	FormatProtobuf // what client-go sends for built-in types (kubectl create)
)

var protobufCodec = protobuf.NewSerializer(Scheme, Scheme)

// Decode decodes a request body for resource r. The body's apiVersion and
// kind, when given, must be r's. Under Strict, unknown and duplicate fields
// are a 400 naming them; under Warn they come back as warnings. (Protobuf
// has no unknown fields to report.)
func Decode(r *Resource, data []byte, format Format, mode FieldValidation) (runtime.Object, []string, error) {
	strict, lax := runtime.Decoder(strictJSON), runtime.Decoder(laxJSON)
	switch format {
	case FormatYAML:
		strict, lax = strictYAML, laxYAML
	case FormatProtobuf:
		strict, lax = protobufCodec, protobufCodec
	}
	gvk := r.GVK()
	into := r.New()
	var warnings []string
	obj, got, err := strict.Decode(data, &gvk, into)
	if err != nil && runtime.IsStrictDecodingError(err) {
		switch mode {
		case FieldValidationStrict:
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("strict decoding error: %s", strictMessage(err)))
		case FieldValidationWarn:
			warnings = strictErrors(err)
		}
		obj, got, err = lax.Decode(data, &gvk, r.New())
	}
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the body of the request could not be decoded as a %s: %v", r.Kind, err))
	}
	if got.Group != gvk.Group || got.Version != gvk.Version || got.Kind != gvk.Kind {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the API version and kind in the data (%s) do not match the expected %s", gvkString(*got), gvkString(gvk)))
	}
	if r.Prune != nil && mode != FieldValidationIgnore {
		if unknown := r.Prune(obj); len(unknown) > 0 {
			msgs := make([]string, len(unknown))
			for i, f := range unknown {
				msgs[i] = fmt.Sprintf("unknown field %q", strings.TrimPrefix(f, "."))
			}
			if mode == FieldValidationStrict {
				return nil, nil, apierrors.NewBadRequest("strict decoding error: " + strings.Join(msgs, ", "))
			}
			warnings = append(warnings, msgs...)
		}
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, warnings, nil
}

func gvkString(gvk schema.GroupVersionKind) string {
	return gvk.GroupVersion().String() + ", Kind=" + gvk.Kind
}

func strictErrors(err error) []string {
	if se, ok := runtime.AsStrictDecodingError(err); ok {
		var out []string
		for _, e := range se.Errors() {
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}

func strictMessage(err error) string {
	var b bytes.Buffer
	for i, e := range strictErrors(err) {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e)
	}
	return b.String()
}

// encode encodes an object for storage, with its apiVersion and kind.
func encode(r *Resource, obj runtime.Object) ([]byte, error) {
	obj.GetObjectKind().SetGroupVersionKind(r.GVK())
	var b bytes.Buffer
	if err := laxJSON.Encode(obj, &b); err != nil {
		return nil, fmt.Errorf("registry: encode %s: %w", r.Kind, err)
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// storedJSON decodes the stored objects of Go types: in one pass, where
// encoding/json (and sigs.k8s.io/json, its fork) first scans the whole
// value to validate it and then again to decode it; a list of pods spent
// most of its time there. Field names match case-sensitively, as
// sigs.k8s.io/json's. (It is the decoder kube-apiserver used for years,
// configured as it was; the store holds only JSON this server wrote, so
// no input from outside reaches it.)
var storedJSON = jsoniter.Config{CaseSensitive: true}.Froze()

// decodeStored decodes an object read from the store. The store holds
// only objects this server wrote, of a known type, so it unmarshals
// straight into the type (the serializer's extra pass to read apiVersion
// and kind was most of a list's cost). Custom objects (unstructured) keep
// sigs.k8s.io/json, whose integers stay int64.
func decodeStored(r *Resource, data []byte) (runtime.Object, error) {
	obj := r.New()
	u, isU := obj.(*unstructured.Unstructured)
	var err error
	if isU {
		err = sigsjson.UnmarshalCaseSensitivePreserveInts(data, obj)
	} else {
		err = storedJSON.Unmarshal(data, obj)
	}
	if err != nil {
		return nil, fmt.Errorf("registry: decode stored %s: %w", r.Kind, err)
	}
	// A custom object keeps the version it was written in: the storage
	// version may have changed since.
	if isU && u.GetAPIVersion() != "" {
		return obj, nil
	}
	obj.GetObjectKind().SetGroupVersionKind(r.GVK())
	return obj, nil
}
