package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/isle-cluster/isle/control/registry"
)

// output is the representation a client asked for in Accept.
type output struct {
	table         bool   // meta.k8s.io/v1 Table
	tableVersion  string // v1 or v1beta1
	yaml          bool
	includeObject string // for tables: None, Object, PartialObjectMetadata
}

// negotiate reads Accept. JSON is the fallback for anything it does not know
// (protobuf included), which every Kubernetes client also accepts.
func negotiate(r *http.Request) output {
	o := output{includeObject: r.URL.Query().Get("includeObject")}
	if o.includeObject == "" {
		o.includeObject = "PartialObjectMetadata"
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch {
		case mt == "application/json" && params["as"] == "Table" && params["g"] == "meta.k8s.io":
			o.table, o.tableVersion = true, params["v"]
			return o
		case mt == "application/json" && params["as"] == "":
			return o
		case mt == "application/yaml":
			o.yaml = true
			return o
		}
	}
	return o
}

// acceptable reports whether the request's Accept header, if any, names
// a media type the API answers in (JSON, a Table, YAML).
func acceptable(r *http.Request) bool {
	accept := strings.TrimSpace(r.Header.Get("Accept"))
	if accept == "" {
		return true
	}
	for _, part := range strings.Split(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "*/*", "application/*", "application/json", "application/yaml":
			return true
		}
	}
	return false
}

// writeJSON writes any value as JSON (or YAML if asked).
func writeBody(w http.ResponseWriter, code int, o output, v any) {
	if o.yaml {
		b, err := yaml.Marshal(v)
		if err == nil {
			w.Header().Set("Content-Type", "application/yaml")
			w.WriteHeader(code)
			_, _ = w.Write(b)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// writeObject writes an API object, as a Table when the client asked for one.
func (s *Server) writeObject(w http.ResponseWriter, r *http.Request, code int, res *registry.Resource, obj runtime.Object) {
	o := negotiate(r)
	if o.table && res != nil {
		t, err := s.toTable(res, obj, o)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/json;as=Table;v="+o.tableVersion+";g=meta.k8s.io")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(t)
		return
	}
	writeBody(w, code, o, obj)
}

// toTable converts an object or list into a Table with kubectl's columns.
func (s *Server) toTable(res *registry.Resource, obj runtime.Object, o output) (*metav1.Table, error) {
	var cols []metav1.TableColumnDefinition
	var rows []metav1.TableRow
	var err error
	if res.Table != nil {
		cols = res.Table.Columns()
		rows, err = res.Table.Rows(obj, s.now())
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	} else {
		cols, rows = defaultTable(obj, s.now())
	}
	items := []runtime.Object{obj}
	t := &metav1.Table{ColumnDefinitions: cols}
	if meta.IsListType(obj) {
		items, _ = meta.ExtractList(obj)
		if lm, err := meta.ListAccessor(obj); err == nil {
			t.ResourceVersion, t.Continue = lm.GetResourceVersion(), lm.GetContinue()
		}
	} else if m, err := meta.Accessor(obj); err == nil {
		t.ResourceVersion = m.GetResourceVersion()
	}
	if len(rows) != len(items) {
		return nil, apierrors.NewInternalError(fmt.Errorf("table of %s: %d rows for %d objects", res, len(rows), len(items)))
	}
	for i := range rows {
		switch o.includeObject {
		case "None":
		case "Object":
			rows[i].Object = runtime.RawExtension{Object: items[i]}
		default:
			m, _ := meta.Accessor(items[i])
			pom := &metav1.PartialObjectMetadata{ObjectMeta: *objectMetaOf(m)}
			pom.APIVersion, pom.Kind = "meta.k8s.io/v1", "PartialObjectMetadata"
			rows[i].Object = runtime.RawExtension{Object: pom}
		}
	}
	t.Rows = rows
	t.APIVersion, t.Kind = "meta.k8s.io/"+orDefault(o.tableVersion, "v1"), "Table"
	return t, nil
}

func objectMetaOf(m metav1.Object) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{
		Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(),
		Generation: m.GetGeneration(), CreationTimestamp: m.GetCreationTimestamp(), DeletionTimestamp: m.GetDeletionTimestamp(),
		Labels: m.GetLabels(), Annotations: m.GetAnnotations(), OwnerReferences: m.GetOwnerReferences(), Finalizers: m.GetFinalizers(),
		GenerateName: m.GetGenerateName(),
	}
}

// defaultTable is NAME and CREATED AT, for resources without printers.
func defaultTable(obj runtime.Object, now time.Time) ([]metav1.TableColumnDefinition, []metav1.TableRow) {
	cols := []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
	items := []runtime.Object{obj}
	if meta.IsListType(obj) {
		items, _ = meta.ExtractList(obj)
	}
	rows := make([]metav1.TableRow, 0, len(items))
	for _, it := range items {
		m, _ := meta.Accessor(it)
		rows = append(rows, metav1.TableRow{Cells: []any{m.GetName(), m.GetCreationTimestamp().UTC().Format(time.RFC3339)}})
	}
	return cols, rows
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// writeError writes err as a metav1.Status with its code.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	st := statusOf(err)
	if st.Code >= 500 && st.Code != http.StatusServiceUnavailable && st.Code != http.StatusGatewayTimeout {
		s.log.Error("apiserver: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	switch {
	case st.Details != nil && st.Details.RetryAfterSeconds > 0:
		w.Header().Set("Retry-After", strconv.Itoa(int(st.Details.RetryAfterSeconds)))
	case st.Code == http.StatusTooManyRequests || st.Code == http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	}
	writeBody(w, int(st.Code), output{}, st)
}

// statusOf converts any error into a Status.
func statusOf(err error) *metav1.Status {
	var se apierrors.APIStatus
	var st metav1.Status
	if errors.As(err, &se) {
		st = se.Status()
	} else {
		st = apierrors.NewInternalError(err).ErrStatus
	}
	st.APIVersion, st.Kind = "v1", "Status"
	if st.Status == "" {
		st.Status = metav1.StatusFailure
	}
	return &st
}
