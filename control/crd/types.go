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
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              CustomResourceDefinitionSpec   `json:"spec"`
	Status            CustomResourceDefinitionStatus `json:"status,omitempty"`
}

// CustomResourceDefinitionList is a list of them.
type CustomResourceDefinitionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CustomResourceDefinition `json:"items"`
}

// CustomResourceDefinitionSpec is what a CRD declares.
type CustomResourceDefinitionSpec struct {
	Group                 string                            `json:"group"`
	Names                 CustomResourceDefinitionNames     `json:"names"`
	Scope                 string                            `json:"scope"`
	Versions              []CustomResourceDefinitionVersion `json:"versions"`
	Conversion            *CustomResourceConversion         `json:"conversion,omitempty"`
	PreserveUnknownFields bool                              `json:"preserveUnknownFields,omitempty"`
}

// CustomResourceDefinitionNames are the kind's names.
type CustomResourceDefinitionNames struct {
	Plural     string   `json:"plural"`
	Singular   string   `json:"singular,omitempty"`
	ShortNames []string `json:"shortNames,omitempty"`
	Kind       string   `json:"kind"`
	ListKind   string   `json:"listKind,omitempty"`
	Categories []string `json:"categories,omitempty"`
}

// Scopes of a CRD.
const (
	NamespaceScoped = "Namespaced"
	ClusterScoped   = "Cluster"
)

// CustomResourceDefinitionVersion is one version of the kind.
type CustomResourceDefinitionVersion struct {
	Name                     string                           `json:"name"`
	Served                   bool                             `json:"served"`
	Storage                  bool                             `json:"storage"`
	Deprecated               bool                             `json:"deprecated,omitempty"`
	DeprecationWarning       *string                          `json:"deprecationWarning,omitempty"`
	Schema                   *CustomResourceValidation        `json:"schema,omitempty"`
	Subresources             *CustomResourceSubresources      `json:"subresources,omitempty"`
	AdditionalPrinterColumns []CustomResourceColumnDefinition `json:"additionalPrinterColumns,omitempty"`
	SelectableFields         []SelectableField                `json:"selectableFields,omitempty"`
}

// CustomResourceValidation holds a version's schema.
type CustomResourceValidation struct {
	OpenAPIV3Schema *JSONSchemaProps `json:"openAPIV3Schema,omitempty"`
}

// CustomResourceSubresources are a version's subresources.
type CustomResourceSubresources struct {
	Status *CustomResourceSubresourceStatus `json:"status,omitempty"`
	Scale  *CustomResourceSubresourceScale  `json:"scale,omitempty"`
}

// CustomResourceSubresourceStatus enables the status subresource.
type CustomResourceSubresourceStatus struct{}

// CustomResourceSubresourceScale says where the replicas are.
type CustomResourceSubresourceScale struct {
	SpecReplicasPath   string  `json:"specReplicasPath"`
	StatusReplicasPath string  `json:"statusReplicasPath"`
	LabelSelectorPath  *string `json:"labelSelectorPath,omitempty"`
}

// CustomResourceColumnDefinition is a column of kubectl get.
type CustomResourceColumnDefinition struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Format      string `json:"format,omitempty"`
	Description string `json:"description,omitempty"`
	Priority    int32  `json:"priority,omitempty"`
	JSONPath    string `json:"jsonPath"`
}

// SelectableField is a field selector of the kind.
type SelectableField struct {
	JSONPath string `json:"jsonPath"`
}

// CustomResourceConversion is how the versions convert.
type CustomResourceConversion struct {
	Strategy string             `json:"strategy"`
	Webhook  *WebhookConversion `json:"webhook,omitempty"`
}

// Conversion strategies.
const (
	NoneConverter    = "None"
	WebhookConverter = "Webhook"
)

// WebhookConversion calls a webhook.
type WebhookConversion struct {
	ClientConfig             *WebhookClientConfig `json:"clientConfig,omitempty"`
	ConversionReviewVersions []string             `json:"conversionReviewVersions"`
}

// WebhookClientConfig is where a webhook is: a URL or a Service.
type WebhookClientConfig struct {
	URL      *string           `json:"url,omitempty"`
	Service  *ServiceReference `json:"service,omitempty"`
	CABundle []byte            `json:"caBundle,omitempty"`
}

// ServiceReference names a Service.
type ServiceReference struct {
	Namespace string  `json:"namespace"`
	Name      string  `json:"name"`
	Path      *string `json:"path,omitempty"`
	Port      *int32  `json:"port,omitempty"`
}

// CustomResourceDefinitionStatus is what the server says of a CRD.
type CustomResourceDefinitionStatus struct {
	Conditions     []CustomResourceDefinitionCondition `json:"conditions,omitempty"`
	AcceptedNames  CustomResourceDefinitionNames       `json:"acceptedNames"`
	StoredVersions []string                            `json:"storedVersions"`
}

// CustomResourceDefinitionCondition is one of the CRD's conditions.
type CustomResourceDefinitionCondition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	Reason             string      `json:"reason,omitempty"`
	Message            string      `json:"message,omitempty"`
	ObservedGeneration int64       `json:"observedGeneration,omitempty"`
}

// Condition types.
const (
	Established   = "Established"
	NamesAccepted = "NamesAccepted"
	Terminating   = "Terminating"
	NonStructural = "NonStructuralSchema"
)

// JSON is any JSON value (a default, an enum's member, an example).
type JSON struct{ Raw []byte }

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
	ID                     string                     `json:"id,omitempty"`
	Schema                 string                     `json:"$schema,omitempty"`
	Ref                    *string                    `json:"$ref,omitempty"`
	Description            string                     `json:"description,omitempty"`
	Type                   string                     `json:"type,omitempty"`
	Format                 string                     `json:"format,omitempty"`
	Title                  string                     `json:"title,omitempty"`
	Default                *JSON                      `json:"default,omitempty"`
	Maximum                *float64                   `json:"maximum,omitempty"`
	ExclusiveMaximum       bool                       `json:"exclusiveMaximum,omitempty"`
	Minimum                *float64                   `json:"minimum,omitempty"`
	ExclusiveMinimum       bool                       `json:"exclusiveMinimum,omitempty"`
	MaxLength              *int64                     `json:"maxLength,omitempty"`
	MinLength              *int64                     `json:"minLength,omitempty"`
	Pattern                string                     `json:"pattern,omitempty"`
	MaxItems               *int64                     `json:"maxItems,omitempty"`
	MinItems               *int64                     `json:"minItems,omitempty"`
	UniqueItems            bool                       `json:"uniqueItems,omitempty"`
	MultipleOf             *float64                   `json:"multipleOf,omitempty"`
	Enum                   []JSON                     `json:"enum,omitempty"`
	MaxProperties          *int64                     `json:"maxProperties,omitempty"`
	MinProperties          *int64                     `json:"minProperties,omitempty"`
	Required               []string                   `json:"required,omitempty"`
	Items                  *JSONSchemaPropsOrArray    `json:"items,omitempty"`
	AllOf                  []JSONSchemaProps          `json:"allOf,omitempty"`
	OneOf                  []JSONSchemaProps          `json:"oneOf,omitempty"`
	AnyOf                  []JSONSchemaProps          `json:"anyOf,omitempty"`
	Not                    *JSONSchemaProps           `json:"not,omitempty"`
	Properties             map[string]JSONSchemaProps `json:"properties,omitempty"`
	AdditionalProperties   *JSONSchemaPropsOrBool     `json:"additionalProperties,omitempty"`
	PatternProperties      map[string]JSONSchemaProps `json:"patternProperties,omitempty"`
	Dependencies           map[string]JSON            `json:"dependencies,omitempty"`
	AdditionalItems        *JSONSchemaPropsOrBool     `json:"additionalItems,omitempty"`
	Definitions            map[string]JSONSchemaProps `json:"definitions,omitempty"`
	ExternalDocs           *ExternalDocumentation     `json:"externalDocs,omitempty"`
	Example                *JSON                      `json:"example,omitempty"`
	Nullable               bool                       `json:"nullable,omitempty"`
	XPreserveUnknownFields *bool                      `json:"x-kubernetes-preserve-unknown-fields,omitempty"`
	XEmbeddedResource      bool                       `json:"x-kubernetes-embedded-resource,omitempty"`
	XIntOrString           bool                       `json:"x-kubernetes-int-or-string,omitempty"`
	XListMapKeys           []string                   `json:"x-kubernetes-list-map-keys,omitempty"`
	XListType              *string                    `json:"x-kubernetes-list-type,omitempty"`
	XMapType               *string                    `json:"x-kubernetes-map-type,omitempty"`
	XValidations           []ValidationRule           `json:"x-kubernetes-validations,omitempty"`
}

// ExternalDocumentation points to more documentation.
type ExternalDocumentation struct {
	Description string `json:"description,omitempty"`
	URL         string `json:"url,omitempty"`
}

// ValidationRule is a CEL rule (x-kubernetes-validations).
type ValidationRule struct {
	Rule              string  `json:"rule"`
	Message           string  `json:"message,omitempty"`
	MessageExpression string  `json:"messageExpression,omitempty"`
	Reason            *string `json:"reason,omitempty"`
	FieldPath         string  `json:"fieldPath,omitempty"`
	OptionalOldSelf   *bool   `json:"optionalOldSelf,omitempty"`
}

// JSONSchemaPropsOrArray is a schema or a list of them (items).
type JSONSchemaPropsOrArray struct {
	Schema      *JSONSchemaProps
	JSONSchemas []JSONSchemaProps
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
	Allows bool
	Schema *JSONSchemaProps
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
