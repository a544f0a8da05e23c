// Package openapi describes the served API as kube-apiserver does: the
// OpenAPI models of the served kinds, reflected from their Go types
// (descriptions from their SwaggerDoc, patch strategies from their tags,
// the list and map types server-side apply needs from the overrides that
// TestApplySchemaIsUpstreams holds to upstream's), and the /openapi/v2
// (JSON and protobuf) and /openapi/v3 documents built from them.
package openapi
