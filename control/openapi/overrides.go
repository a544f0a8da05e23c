package openapi

import "k8s.io/kube-openapi/pkg/validation/spec"

// listType is a field's x-kubernetes-list-type ("atomic", "set", "map"
// with its keys) or x-kubernetes-map-type ("atomic", "granular").
type listType struct {
	list    string
	keys    []string
	mapType string
}

func (l listType) apply(s *spec.Schema) {
	if l.list != "" {
		s.AddExtension(extListType, l.list)
	}
	if len(l.keys) > 0 {
		keys := make([]any, len(l.keys))
		for i, k := range l.keys {
			keys[i] = k
		}
		s.AddExtension(extListMapKeys, keys)
	}
	if l.mapType != "" {
		s.AddExtension(extMapType, l.mapType)
	}
}

// listTypes: "model.field" → its list or map type where the field's tags
// do not say it, as the +listType, +listMapKey and +mapType markers of
// k8s.io/api's sources say (TestApplySchemaIsUpstreams holds it to
// client-go's copy of kube-apiserver's apply schema).
var listTypes = map[string]listType{
	"io.k8s.api.batch.v1.JobStatus.conditions":                              {list: "atomic"},
	"io.k8s.api.batch.v1.PodFailurePolicyOnExitCodesRequirement.values":     {list: "set"},
	"io.k8s.api.batch.v1.UncountedTerminatedPods.failed":                    {list: "set"},
	"io.k8s.api.batch.v1.UncountedTerminatedPods.succeeded":                 {list: "set"},
	"io.k8s.api.certificates.v1.CertificateSigningRequestStatus.conditions": {list: "map", keys: []string{"type"}},
	"io.k8s.api.core.v1.Container.ports":                                    {list: "map", keys: []string{"containerPort", "protocol"}},
	"io.k8s.api.core.v1.ContainerRestartRuleOnExitCodes.values":             {list: "set"},
	"io.k8s.api.core.v1.EphemeralContainer.ports":                           {list: "map", keys: []string{"containerPort", "protocol"}},
	"io.k8s.api.core.v1.NodeAllocatableResourceClaimStatus.containers":      {list: "set"},
	"io.k8s.api.core.v1.NodePodPreemptionPolicy.disableResizePreemption":    {list: "set"},
	"io.k8s.api.core.v1.PodSpec.nodeSelector":                               {mapType: "atomic"},
	"io.k8s.api.core.v1.PodSpec.topologySpreadConstraints":                  {list: "map", keys: []string{"topologyKey", "whenUnsatisfiable"}},
	"io.k8s.api.core.v1.PodStatus.hostIPs":                                  {list: "atomic"},
	"io.k8s.api.core.v1.PodStatus.volumeHealth":                             {list: "map", keys: []string{"name"}},
	"io.k8s.api.core.v1.PodVolumeHealth.healthConditions":                   {list: "map", keys: []string{"status", "reason"}},
	"io.k8s.api.core.v1.ResourceRequirements.claims":                        {list: "map", keys: []string{"name"}},
	"io.k8s.api.core.v1.ResourceStatus.resources":                           {list: "map", keys: []string{"resourceID"}},
	"io.k8s.api.core.v1.ServiceSpec.ports":                                  {list: "map", keys: []string{"port", "protocol"}},
	"io.k8s.api.core.v1.ReplicationControllerSpec.selector":                 {mapType: "atomic"},
	"io.k8s.api.core.v1.ServiceSpec.selector":                               {mapType: "atomic"},
	"io.k8s.api.core.v1.VolumeHealthStatus.healthConditions":                {list: "map", keys: []string{"status", "reason"}},
	"io.k8s.api.core.v1.VolumeMount.bindMountOptions":                       {list: "set"},
	"io.k8s.api.discovery.v1.Endpoint.addresses":                            {list: "set"},
	"io.k8s.api.node.v1.Scheduling.nodeSelector":                            {mapType: "atomic"},
}

// structTypes: model → x-kubernetes-map-type of a struct (+structType).
var structTypes = map[string]string{
	"io.k8s.api.autoscaling.v1.CrossVersionObjectReference": "atomic",
	"io.k8s.api.core.v1.ConfigMapKeySelector":               "atomic",
	"io.k8s.api.core.v1.EndpointAddress":                    "atomic",
	"io.k8s.api.core.v1.EndpointPort":                       "atomic",
	"io.k8s.api.core.v1.EvictionResponder":                  "atomic",
	"io.k8s.api.core.v1.FileKeySelector":                    "atomic",
	"io.k8s.api.core.v1.LocalObjectReference":               "atomic",
	"io.k8s.api.core.v1.NodeSelector":                       "atomic",
	"io.k8s.api.core.v1.NodeSelectorTerm":                   "atomic",
	"io.k8s.api.core.v1.ObjectFieldSelector":                "atomic",
	"io.k8s.api.core.v1.ObjectReference":                    "atomic",
	"io.k8s.api.core.v1.ResourceFieldSelector":              "atomic",
	"io.k8s.api.core.v1.SecretKeySelector":                  "atomic",
	"io.k8s.api.core.v1.ScopeSelector":                      "atomic",
	"io.k8s.api.core.v1.SecretReference":                    "atomic",
	"io.k8s.api.core.v1.TopologySelectorTerm":               "atomic",
	"io.k8s.api.core.v1.TypedLocalObjectReference":          "atomic",
	"io.k8s.api.discovery.v1.EndpointPort":                  "atomic",
	"io.k8s.api.networking.v1.ServiceBackendPort":           "atomic",
	"io.k8s.api.rbac.v1.RoleRef":                            "atomic",
	"io.k8s.api.rbac.v1.Subject":                            "atomic",
	"io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector":    "atomic",
	"io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference":   "atomic",
}

// defaults: "model.field" → the default a field has by a +default marker
// (server-side apply fills in a list item's missing key with it).
var defaults = map[string]any{
	"io.k8s.api.core.v1.ContainerPort.protocol":    "TCP",
	"io.k8s.api.core.v1.LocalObjectReference.name": "",
	"io.k8s.api.core.v1.ServicePort.protocol":      "TCP",
}
