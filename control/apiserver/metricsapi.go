package apiserver

import (
	"encoding/json"
	"net/http"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/isle-cluster/isle/control/registry"
)

// metrics.k8s.io/v1beta1, served from this server's own metrics.Cache as
// metrics-server serves it: NodeMetrics and PodMetrics, get and list
// (label and field selectors apply to the Nodes and Pods), read-only, no
// watch. Any authenticated user may read them. Objects carry the labels of
// their Node or Pod and a creationTimestamp of the moment they are served.

var metricsGV = metricsv1beta1.SchemeGroupVersion

const metricsPrefix = "/apis/" + metricsv1beta1.GroupName + "/v1beta1/"

// metricsResources are the served resources, with the kinds and verbs
// metrics-server advertises.
var metricsResources = []struct {
	resource, kind string
	namespaced     bool
	obj, list      any // Go types, for the OpenAPI documents
}{
	{"nodes", "NodeMetrics", false, metricsv1beta1.NodeMetrics{}, metricsv1beta1.NodeMetricsList{}},
	{"pods", "PodMetrics", true, metricsv1beta1.PodMetrics{}, metricsv1beta1.PodMetricsList{}},
}

var metricsVerbs = []string{"get", "list"}

func metricsGroup() metav1.APIGroup {
	v := metav1.GroupVersionForDiscovery{GroupVersion: metricsGV.String(), Version: metricsGV.Version}
	return metav1.APIGroup{Name: metricsGV.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
}

func metricsResourceList() *metav1.APIResourceList {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: metricsGV.String()}
	for _, r := range metricsResources {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: r.resource, Namespaced: r.namespaced, Kind: r.kind, Verbs: metricsVerbs})
	}
	return list
}

func metricsGroupDiscovery() apidiscoveryv2.APIGroupDiscovery {
	vd := apidiscoveryv2.APIVersionDiscovery{Version: metricsGV.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
	for _, r := range metricsResources {
		scope := apidiscoveryv2.ScopeCluster
		if r.namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		vd.Resources = append(vd.Resources, apidiscoveryv2.APIResourceDiscovery{
			Resource: r.resource, Scope: scope, Verbs: metricsVerbs,
			ResponseKind: &metav1.GroupVersionKind{Group: metricsGV.Group, Version: metricsGV.Version, Kind: r.kind},
		})
	}
	return apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: metricsGV.Group}, Versions: []apidiscoveryv2.APIVersionDiscovery{vd}}
}

// metricsRequest is what a metrics.k8s.io URL names.
type metricsRequest struct {
	resource        string // nodes or pods
	namespace, name string
}

func parseMetricsPath(path string) (metricsRequest, bool) {
	parts := strings.Split(strings.Trim(strings.TrimPrefix(path, metricsPrefix), "/"), "/")
	switch {
	case len(parts) <= 2 && (parts[0] == "nodes" || parts[0] == "pods"):
		m := metricsRequest{resource: parts[0]}
		if len(parts) == 2 {
			m.name = parts[1]
		}
		return m, m.resource == "nodes" || m.name == ""
	case len(parts) >= 3 && len(parts) <= 4 && parts[0] == "namespaces" && parts[1] != "" && parts[2] == "pods":
		m := metricsRequest{resource: "pods", namespace: parts[1]}
		if len(parts) == 4 {
			m.name = parts[3]
		}
		return m, true
	}
	return metricsRequest{}, false
}

// serveMetrics answers a request under /apis/metrics.k8s.io/v1beta1/.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) (verb, resource string) {
	mr, ok := parseMetricsPath(r.URL.Path)
	if !ok {
		s.writeError(w, r, notFound())
		return "notfound", ""
	}
	resource = mr.resource + "." + metricsGV.Group
	gr := metricsGV.WithResource(mr.resource).GroupResource()
	q := r.URL.Query()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.writeError(w, r, apierrors.NewMethodNotSupported(gr, r.Method))
		return "unsupported", resource
	}
	if q.Get("watch") == "true" || q.Get("watch") == "1" {
		s.writeError(w, r, apierrors.NewMethodNotSupported(gr, "watch"))
		return "unsupported", resource
	}
	if mr.name != "" {
		obj, err := s.getMetrics(r, mr)
		if err != nil {
			s.writeError(w, r, err)
			return "get", resource
		}
		s.writeMetrics(w, r, obj)
		return "get", resource
	}
	opts, err := listOptions(r)
	if err != nil {
		s.writeError(w, r, err)
		return "list", resource
	}
	list, err := s.listMetrics(r, mr, opts)
	if err != nil {
		s.writeError(w, r, err)
		return "list", resource
	}
	s.writeMetrics(w, r, list)
	return "list", resource
}

func (s *Server) mustResource(gvr schema.GroupVersionResource) *registry.Resource {
	res, ok := s.store.Resources().Lookup(gvr)
	if !ok {
		panic("apiserver: " + gvr.String() + " is not served")
	}
	return res
}

// getMetrics returns the NodeMetrics or PodMetrics of an existing Node or
// Pod that has a sample; NotFound otherwise, as metrics-server answers.
func (s *Server) getMetrics(r *http.Request, mr metricsRequest) (runtime.Object, error) {
	notFound := apierrors.NewNotFound(metricsGV.WithResource(mr.resource).GroupResource(), mr.name)
	local := metav1.GetOptions{ResourceVersion: "0"}
	if mr.resource == "nodes" {
		obj, err := s.store.Get(r.Context(), s.mustResource(corev1.SchemeGroupVersion.WithResource("nodes")), "", mr.name, local)
		if apierrors.IsNotFound(err) {
			return nil, notFound
		}
		if err != nil {
			return nil, err
		}
		m, ok := s.nodeMetrics(obj.(*corev1.Node))
		if !ok {
			return nil, notFound
		}
		return m, nil
	}
	obj, err := s.store.Get(r.Context(), s.mustResource(corev1.SchemeGroupVersion.WithResource("pods")), mr.namespace, mr.name, local)
	if apierrors.IsNotFound(err) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	m, ok := s.podMetrics(obj.(*corev1.Pod))
	if !ok {
		return nil, notFound
	}
	return m, nil
}

// listMetrics lists the Nodes or Pods that match the request's selectors,
// from this server's copy of the store, and answers with those that have
// a sample.
func (s *Server) listMetrics(r *http.Request, mr metricsRequest, opts metav1.ListOptions) (runtime.Object, error) {
	opts.ResourceVersion, opts.ResourceVersionMatch, opts.Limit, opts.Continue = "0", "", 0, ""
	if mr.resource == "nodes" {
		list := &metricsv1beta1.NodeMetricsList{TypeMeta: metav1.TypeMeta{APIVersion: metricsGV.String(), Kind: "NodeMetricsList"}, Items: []metricsv1beta1.NodeMetrics{}}
		_, err := s.store.Scan(r.Context(), s.mustResource(corev1.SchemeGroupVersion.WithResource("nodes")), "", opts, func(obj runtime.Object) error {
			if m, ok := s.nodeMetrics(obj.(*corev1.Node)); ok {
				list.Items = append(list.Items, *m)
			}
			return nil
		})
		return list, err
	}
	list := &metricsv1beta1.PodMetricsList{TypeMeta: metav1.TypeMeta{APIVersion: metricsGV.String(), Kind: "PodMetricsList"}, Items: []metricsv1beta1.PodMetrics{}}
	_, err := s.store.Scan(r.Context(), s.mustResource(corev1.SchemeGroupVersion.WithResource("pods")), mr.namespace, opts, func(obj runtime.Object) error {
		if m, ok := s.podMetrics(obj.(*corev1.Pod)); ok {
			list.Items = append(list.Items, *m)
		}
		return nil
	})
	return list, err
}

func (s *Server) nodeMetrics(n *corev1.Node) (*metricsv1beta1.NodeMetrics, bool) {
	m, ok := s.cfg.Usage.NodeMetrics(n.Name)
	if !ok {
		return nil, false
	}
	m.Labels, m.CreationTimestamp = n.Labels, metav1.NewTime(s.now())
	return &m, true
}

func (s *Server) podMetrics(p *corev1.Pod) (*metricsv1beta1.PodMetrics, bool) {
	m, ok := s.cfg.Usage.PodMetrics(p.Namespace, p.Name, p.UID)
	if !ok {
		return nil, false
	}
	m.Labels, m.CreationTimestamp = p.Labels, metav1.NewTime(s.now())
	return &m, true
}

// writeMetrics writes metrics objects, as a Table (NAME, CPU, MEMORY,
// WINDOW, as metrics-server prints them) when the client asked for one.
func (s *Server) writeMetrics(w http.ResponseWriter, r *http.Request, obj runtime.Object) {
	o := negotiate(r)
	if !o.table {
		writeBody(w, http.StatusOK, o, obj)
		return
	}
	t := &metav1.Table{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/" + orDefault(o.tableVersion, "v1"), Kind: "Table"},
		ColumnDefinitions: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
			{Name: "CPU", Type: "string", Format: "quantity", Description: "CPU usage, in cores."},
			{Name: "Memory", Type: "string", Format: "quantity", Description: "Memory usage: the working set, in bytes."},
			{Name: "Window", Type: "string", Format: "duration", Description: "The interval the usage is an average of, ending at the sample's timestamp."},
		},
	}
	row := func(meta *metav1.ObjectMeta, usage corev1.ResourceList, window metav1.Duration, item runtime.Object) {
		cells := []any{meta.Name, usage.Cpu().String(), usage.Memory().String(), window.Duration.String()}
		var embedded runtime.Object
		switch o.includeObject {
		case "None":
		case "Object":
			embedded = item
		default:
			pom := &metav1.PartialObjectMetadata{ObjectMeta: *meta}
			pom.APIVersion, pom.Kind = "meta.k8s.io/v1", "PartialObjectMetadata"
			embedded = pom
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: embedded}})
	}
	switch v := obj.(type) {
	case *metricsv1beta1.NodeMetrics:
		row(&v.ObjectMeta, v.Usage, v.Window, v)
	case *metricsv1beta1.NodeMetricsList:
		for i := range v.Items {
			row(&v.Items[i].ObjectMeta, v.Items[i].Usage, v.Items[i].Window, &v.Items[i])
		}
	case *metricsv1beta1.PodMetrics:
		row(&v.ObjectMeta, podUsage(v), v.Window, v)
	case *metricsv1beta1.PodMetricsList:
		for i := range v.Items {
			row(&v.Items[i].ObjectMeta, podUsage(&v.Items[i]), v.Items[i].Window, &v.Items[i])
		}
	}
	w.Header().Set("Content-Type", "application/json;as=Table;v="+orDefault(o.tableVersion, "v1")+";g=meta.k8s.io")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(t)
}

// podUsage sums a pod's containers.
func podUsage(m *metricsv1beta1.PodMetrics) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for _, c := range m.Containers {
		for name, q := range c.Usage {
			total := sum[name]
			total.Add(q)
			sum[name] = total
		}
	}
	return sum
}
