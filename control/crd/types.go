package crd

import (
	"bytes"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// The apiextensions.k8s.io/v1 API, as JSON: k8s.io/apiextensions-apiserver
// holds these types, but importing it would raise go.etcd.io/raft to a
// release of another protobuf API and add its conversions to the binary;
// the JSON here is the same.

// GroupVersion is apiextensions.k8s.io/v1.
var GroupVersion = schema.GroupVersion{Group: "apiextensions.k8s.io", Version: "v1"}

// CustomResourceDefinition declares a kind served by the API server.
type CustomResourceDefinition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty" pb:"1"`
	Spec              CustomResourceDefinitionSpec   `json:"spec" pb:"2"`
	Status            CustomResourceDefinitionStatus `json:"status,omitempty" pb:"3"`
}

// CustomResourceDefinitionList is a list of them.
type CustomResourceDefinitionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty" pb:"1"`
	Items           []CustomResourceDefinition `json:"items" pb:"2"`
}

// CustomResourceDefinitionSpec is what a CRD declares.
type CustomResourceDefinitionSpec struct {
	Group                 string                            `json:"group" pb:"1"`
	Names                 CustomResourceDefinitionNames     `json:"names" pb:"3"`
	Scope                 string                            `json:"scope" pb:"4"`
	Versions              []CustomResourceDefinitionVersion `json:"versions" pb:"7"`
	Conversion            *CustomResourceConversion         `json:"conversion,omitempty" pb:"9"`
	PreserveUnknownFields bool                              `json:"preserveUnknownFields,omitempty" pb:"10"`
}

// CustomResourceDefinitionNames are the kind's names.
type CustomResourceDefinitionNames struct {
	Plural     string   `json:"plural" pb:"1"`
	Singular   string   `json:"singular,omitempty" pb:"2"`
	ShortNames []string `json:"shortNames,omitempty" pb:"3"`
	Kind       string   `json:"kind" pb:"4"`
	ListKind   string   `json:"listKind,omitempty" pb:"5"`
	Categories []string `json:"categories,omitempty" pb:"6"`
}

// Scopes of a CRD.
const (
	NamespaceScoped = "Namespaced"
	ClusterScoped   = "Cluster"
)

// CustomResourceDefinitionVersion is one version of the kind.
type CustomResourceDefinitionVersion struct {
	Name                     string                           `json:"name" pb:"1"`
	Served                   bool                             `json:"served" pb:"2"`
	Storage                  bool                             `json:"storage" pb:"3"`
	Deprecated               bool                             `json:"deprecated,omitempty" pb:"7"`
	DeprecationWarning       *string                          `json:"deprecationWarning,omitempty" pb:"8"`
	Schema                   *CustomResourceValidation        `json:"schema,omitempty" pb:"4"`
	Subresources             *CustomResourceSubresources      `json:"subresources,omitempty" pb:"5"`
	AdditionalPrinterColumns []CustomResourceColumnDefinition `json:"additionalPrinterColumns,omitempty" pb:"6"`
	SelectableFields         []SelectableField                `json:"selectableFields,omitempty" pb:"9"`
}

// CustomResourceValidation holds a version's schema.
type CustomResourceValidation struct {
	OpenAPIV3Schema *JSONSchemaProps `json:"openAPIV3Schema,omitempty" pb:"1"`
}

// CustomResourceSubresources are a version's subresources.
type CustomResourceSubresources struct {
	Status *CustomResourceSubresourceStatus `json:"status,omitempty" pb:"1"`
	Scale  *CustomResourceSubresourceScale  `json:"scale,omitempty" pb:"2"`
}

// CustomResourceSubresourceStatus enables the status subresource.
type CustomResourceSubresourceStatus struct{}

// CustomResourceSubresourceScale says where the replicas are.
type CustomResourceSubresourceScale struct {
	SpecReplicasPath   string  `json:"specReplicasPath" pb:"1"`
	StatusReplicasPath string  `json:"statusReplicasPath" pb:"2"`
	LabelSelectorPath  *string `json:"labelSelectorPath,omitempty" pb:"3"`
}

// CustomResourceColumnDefinition is a column of kubectl get.
type CustomResourceColumnDefinition struct {
	Name        string `json:"name" pb:"1"`
	Type        string `json:"type" pb:"2"`
	Format      string `json:"format,omitempty" pb:"3"`
	Description string `json:"description,omitempty" pb:"4"`
	Priority    int32  `json:"priority,omitempty" pb:"5"`
	JSONPath    string `json:"jsonPath" pb:"6"`
}

// SelectableField is a field selector of the kind.
type SelectableField struct {
	JSONPath string `json:"jsonPath" pb:"1"`
}

// CustomResourceConversion is how the versions convert.
type CustomResourceConversion struct {
	Strategy string             `json:"strategy" pb:"1"`
	Webhook  *WebhookConversion `json:"webhook,omitempty" pb:"2"`
}

// Conversion strategies.
const (
	NoneConverter    = "None"
	WebhookConverter = "Webhook"
)

// WebhookConversion calls a webhook.
type WebhookConversion struct {
	ClientConfig             *WebhookClientConfig `json:"clientConfig,omitempty" pb:"2"`
	ConversionReviewVersions []string             `json:"conversionReviewVersions" pb:"3"`
}

// WebhookClientConfig is where a webhook is: a URL or a Service.
type WebhookClientConfig struct {
	URL      *string           `json:"url,omitempty" pb:"3"`
	Service  *ServiceReference `json:"service,omitempty" pb:"1"`
	CABundle []byte            `json:"caBundle,omitempty" pb:"2"`
}

// ServiceReference names a Service.
type ServiceReference struct {
	Namespace string  `json:"namespace" pb:"1"`
	Name      string  `json:"name" pb:"2"`
	Path      *string `json:"path,omitempty" pb:"3"`
	Port      *int32  `json:"port,omitempty" pb:"4"`
}

// CustomResourceDefinitionStatus is what the server says of a CRD.
type CustomResourceDefinitionStatus struct {
	Conditions     []CustomResourceDefinitionCondition `json:"conditions,omitempty" pb:"1"`
	AcceptedNames  CustomResourceDefinitionNames       `json:"acceptedNames" pb:"2"`
	StoredVersions []string                            `json:"storedVersions" pb:"3"`
}

// CustomResourceDefinitionCondition is one of the CRD's conditions.
type CustomResourceDefinitionCondition struct {
	Type               string      `json:"type" pb:"1"`
	Status             string      `json:"status" pb:"2"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty" pb:"3"`
	Reason             string      `json:"reason,omitempty" pb:"4"`
	Message            string      `json:"message,omitempty" pb:"5"`
	ObservedGeneration int64       `json:"observedGeneration,omitempty" pb:"6"`
}

// Condition types.
const (
	Established   = "Established"
	NamesAccepted = "NamesAccepted"
	Terminating   = "Terminating"
	NonStructural = "NonStructuralSchema"
)

// JSON is any JSON value (a default, an enum's member, an example).
type JSON struct {
	Raw []byte `pb:"1"`
}

// MarshalJSON writes the value.
func (j JSON) MarshalJSON() ([]byte, error) {
	if len(j.Raw) == 0 {
		return []byte("null"), nil
	}
	return j.Raw, nil
}

// UnmarshalJSON keeps the value.
func (j *JSON) UnmarshalJSON(b []byte) error {
	if !bytes.Equal(b, []byte("null")) {
		j.Raw = append(j.Raw[:0], b...)
	}
	return nil
}

// Value decodes the value (integers as int64, as in objects).
func (j JSON) Value() (any, error) {
	var v any
	err := utiljson.Unmarshal(j.Raw, &v)
	return v, err
}

// JSONSchemaProps is a JSON schema, as CRDs write it.
type JSONSchemaProps struct {
	ID                     string                     `json:"id,omitempty" pb:"1"`
	Schema                 string                     `json:"$schema,omitempty" pb:"2"`
	Ref                    *string                    `json:"$ref,omitempty" pb:"3"`
	Description            string                     `json:"description,omitempty" pb:"4"`
	Type                   string                     `json:"type,omitempty" pb:"5"`
	Format                 string                     `json:"format,omitempty" pb:"6"`
	Title                  string                     `json:"title,omitempty" pb:"7"`
	Default                *JSON                      `json:"default,omitempty" pb:"8"`
	Maximum                *float64                   `json:"maximum,omitempty" pb:"9"`
	ExclusiveMaximum       bool                       `json:"exclusiveMaximum,omitempty" pb:"10"`
	Minimum                *float64                   `json:"minimum,omitempty" pb:"11"`
	ExclusiveMinimum       bool                       `json:"exclusiveMinimum,omitempty" pb:"12"`
	MaxLength              *int64                     `json:"maxLength,omitempty" pb:"13"`
	MinLength              *int64                     `json:"minLength,omitempty" pb:"14"`
	Pattern                string                     `json:"pattern,omitempty" pb:"15"`
	MaxItems               *int64                     `json:"maxItems,omitempty" pb:"16"`
	MinItems               *int64                     `json:"minItems,omitempty" pb:"17"`
	UniqueItems            bool                       `json:"uniqueItems,omitempty" pb:"18"`
	MultipleOf             *float64                   `json:"multipleOf,omitempty" pb:"19"`
	Enum                   []JSON                     `json:"enum,omitempty" pb:"20"`
	MaxProperties          *int64                     `json:"maxProperties,omitempty" pb:"21"`
	MinProperties          *int64                     `json:"minProperties,omitempty" pb:"22"`
	Required               []string                   `json:"required,omitempty" pb:"23"`
	Items                  *JSONSchemaPropsOrArray    `json:"items,omitempty" pb:"24"`
	AllOf                  []JSONSchemaProps          `json:"allOf,omitempty" pb:"25"`
	OneOf                  []JSONSchemaProps          `json:"oneOf,omitempty" pb:"26"`
	AnyOf                  []JSONSchemaProps          `json:"anyOf,omitempty" pb:"27"`
	Not                    *JSONSchemaProps           `json:"not,omitempty" pb:"28"`
	Properties             map[string]JSONSchemaProps `json:"properties,omitempty" pb:"29"`
	AdditionalProperties   *JSONSchemaPropsOrBool     `json:"additionalProperties,omitempty" pb:"30"`
	PatternProperties      map[string]JSONSchemaProps `json:"patternProperties,omitempty" pb:"31"`
	Dependencies           map[string]JSON            `json:"dependencies,omitempty" pb:"32,deps"`
	AdditionalItems        *JSONSchemaPropsOrBool     `json:"additionalItems,omitempty" pb:"33"`
	Definitions            map[string]JSONSchemaProps `json:"definitions,omitempty" pb:"34"`
	ExternalDocs           *ExternalDocumentation     `json:"externalDocs,omitempty" pb:"35"`
	Example                *JSON                      `json:"example,omitempty" pb:"36"`
	Nullable               bool                       `json:"nullable,omitempty" pb:"37"`
	XPreserveUnknownFields *bool                      `json:"x-kubernetes-preserve-unknown-fields,omitempty" pb:"38"`
	XEmbeddedResource      bool                       `json:"x-kubernetes-embedded-resource,omitempty" pb:"39"`
	XIntOrString           bool                       `json:"x-kubernetes-int-or-string,omitempty" pb:"40"`
	XListMapKeys           []string                   `json:"x-kubernetes-list-map-keys,omitempty" pb:"41"`
	XListType              *string                    `json:"x-kubernetes-list-type,omitempty" pb:"42"`
	XMapType               *string                    `json:"x-kubernetes-map-type,omitempty" pb:"43"`
	XValidations           []ValidationRule           `json:"x-kubernetes-validations,omitempty" pb:"44"`
}

// ExternalDocumentation points to more documentation.
type ExternalDocumentation struct {
	Description string `json:"description,omitempty" pb:"1"`
	URL         string `json:"url,omitempty" pb:"2"`
}

// ValidationRule is a CEL rule (x-kubernetes-validations).
type ValidationRule struct {
	Rule              string  `json:"rule" pb:"1"`
	Message           string  `json:"message,omitempty" pb:"2"`
	MessageExpression string  `json:"messageExpression,omitempty" pb:"3"`
	Reason            *string `json:"reason,omitempty" pb:"4"`
	FieldPath         string  `json:"fieldPath,omitempty" pb:"5"`
	OptionalOldSelf   *bool   `json:"optionalOldSelf,omitempty" pb:"6"`
}

// JSONSchemaPropsOrArray is a schema or a list of them (items).
type JSONSchemaPropsOrArray struct {
	Schema      *JSONSchemaProps  `pb:"1"`
	JSONSchemas []JSONSchemaProps `pb:"2"`
}

// MarshalJSON writes the schema or the list.
func (s JSONSchemaPropsOrArray) MarshalJSON() ([]byte, error) {
	if len(s.JSONSchemas) > 0 {
		return json.Marshal(s.JSONSchemas)
	}
	return json.Marshal(s.Schema)
}

// UnmarshalJSON reads a schema or a list.
func (s *JSONSchemaPropsOrArray) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '{':
		s.Schema = &JSONSchemaProps{}
		return json.Unmarshal(b, s.Schema)
	case len(b) > 0 && b[0] == '[':
		return json.Unmarshal(b, &s.JSONSchemas)
	case bytes.Equal(b, []byte("null")):
		return nil
	}
	return fmt.Errorf("items: want a schema or a list of schemas")
}

// JSONSchemaPropsOrBool is a schema or a boolean (additionalProperties).
type JSONSchemaPropsOrBool struct {
	Allows bool             `pb:"1"`
	Schema *JSONSchemaProps `pb:"2"`
}

// MarshalJSON writes the schema or the boolean.
func (s JSONSchemaPropsOrBool) MarshalJSON() ([]byte, error) {
	if s.Schema != nil {
		return json.Marshal(s.Schema)
	}
	return json.Marshal(s.Allows)
}

// UnmarshalJSON reads a schema or a boolean.
func (s *JSONSchemaPropsOrBool) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '{':
		s.Allows, s.Schema = true, &JSONSchemaProps{}
		return json.Unmarshal(b, s.Schema)
	case bytes.Equal(b, []byte("true")), bytes.Equal(b, []byte("false")):
		s.Allows = b[0] == 't'
		return nil
	case bytes.Equal(b, []byte("null")):
		return nil
	}
	return fmt.Errorf("additionalProperties: want a schema or a boolean")
}

// DeepCopyObject copies the CRD through JSON: it is written seldom.
func (c *CustomResourceDefinition) DeepCopyObject() runtime.Object {
	out := &CustomResourceDefinition{}
	copyJSON(c, out)
	return out
}

// DeepCopy copies the CRD.
func (c *CustomResourceDefinition) DeepCopy() *CustomResourceDefinition {
	return c.DeepCopyObject().(*CustomResourceDefinition)
}

// DeepCopyObject copies the list.
func (l *CustomResourceDefinitionList) DeepCopyObject() runtime.Object {
	out := &CustomResourceDefinitionList{}
	copyJSON(l, out)
	return out
}

func copyJSON(in, out any) {
	b, err := json.Marshal(in)
	if err != nil {
		panic("crd: copy: " + err.Error())
	}
	if err := json.Unmarshal(b, out); err != nil {
		panic("crd: copy: " + err.Error())
	}
}

// OpenAPISchemaType: any JSON value (a default, an enum member).
func (JSON) OpenAPISchemaType() []string { return nil }

// OpenAPISchemaType: a schema or a list of them.
func (JSONSchemaPropsOrArray) OpenAPISchemaType() []string { return nil }

// OpenAPISchemaType: a schema or a boolean.
func (JSONSchemaPropsOrBool) OpenAPISchemaType() []string { return nil }
