package apiserver

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/registry"
)

// serveList answers a list. JSON lists and Tables are streamed: objects
// are decoded, converted and written one at a time, so a list of a
// thousand pods costs the server about one pod of memory, not the whole
// answer. (The list's metadata comes last in the JSON object; clients
// read fields in any order.) YAML is built whole.
func (s *Server) serveList(w http.ResponseWriter, r *http.Request, req request) {
	opts, err := listOptions(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o := negotiate(r)
	if o.yaml {
		list, err := s.store.List(r.Context(), req.Resource, req.Namespace, opts)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeObject(w, r, http.StatusOK, req.Resource, list)
		return
	}
	ls := &listStream{s: s, w: w, o: o, res: req}
	var with []registry.ScanOption
	if o.table && o.includeObject != "Object" {
		// The rows show no managedFields and change nothing.
		with = append(with, registry.WithoutManagedFields(), registry.ReadOnly())
	}
	lm, err := s.store.Scan(r.Context(), req.Resource, req.Namespace, opts, ls.item, with...)
	if err != nil {
		if !ls.started {
			s.writeError(w, r, err)
			return
		}
		s.log.Error("apiserver: list failed midway; aborting the answer", "path", r.URL.Path, "err", err)
		panic(http.ErrAbortHandler)
	}
	if err := ls.finish(lm); err != nil {
		s.log.Debug("apiserver: list: client went away", "err", err)
	}
}

var errRowCount = errors.New("the printer did not make exactly one row for one object")

// listStream writes a list answer item by item.
type listStream struct {
	s       *Server
	w       http.ResponseWriter
	bw      *bufio.Writer
	o       output
	res     request
	started bool
	n       int
	buf     []byte // a row's JSON, reused
}

func (ls *listStream) start() error {
	ls.started = true
	res := ls.res.Resource
	ls.bw = bufio.NewWriterSize(ls.w, 32<<10)
	var head []byte
	if ls.o.table {
		var cols []metav1.TableColumnDefinition
		if res.Table != nil {
			cols = res.Table.Columns()
		} else {
			cols, _ = defaultTable(res.New(), ls.s.now())
		}
		colJSON, err := json.Marshal(cols)
		if err != nil {
			return err
		}
		version := orDefault(ls.o.tableVersion, "v1")
		ls.w.Header().Set("Content-Type", "application/json;as=Table;v="+version+";g=meta.k8s.io")
		head = append([]byte(`{"kind":"Table","apiVersion":"meta.k8s.io/`+version+`","columnDefinitions":`), colJSON...)
		head = append(head, `,"rows":[`...)
	} else {
		ls.w.Header().Set("Content-Type", "application/json")
		gv := res.GroupVersion().String()
		head = []byte(`{"kind":"` + res.Kind + `List","apiVersion":"` + gv + `","items":[`)
	}
	ls.w.WriteHeader(http.StatusOK)
	_, err := ls.bw.Write(head)
	return err
}

// item writes one object (as one Table row when a Table was asked for).
func (ls *listStream) item(obj runtime.Object) error {
	if !ls.started {
		if err := ls.start(); err != nil {
			return err
		}
	}
	var b []byte
	var err error
	if ls.o.table {
		b, err = ls.row(obj)
	} else {
		b, err = json.Marshal(obj)
	}
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if ls.n > 0 {
		if err := ls.bw.WriteByte(','); err != nil {
			return err
		}
	}
	ls.n++
	_, err = ls.bw.Write(b)
	return err
}

// row is the JSON of obj's row, as encoding/json writes a TableRow, with
// its object written once (a RawExtension's is written, then compacted
// again).
func (ls *listStream) row(obj runtime.Object) ([]byte, error) {
	res := ls.res.Resource
	var rows []metav1.TableRow
	if res.Table != nil {
		var err error
		if rows, err = res.Table.Rows(obj, ls.s.now()); err != nil {
			return nil, err
		}
	} else {
		_, rows = defaultTable(obj, ls.s.now())
	}
	if len(rows) != 1 {
		return nil, errRowCount
	}
	var object any
	switch ls.o.includeObject {
	case "None":
	case "Object":
		object = obj
	default:
		m, _ := meta.Accessor(obj)
		pom := &metav1.PartialObjectMetadata{ObjectMeta: *objectMetaOf(m)}
		pom.APIVersion, pom.Kind = "meta.k8s.io/v1", "PartialObjectMetadata"
		object = pom
	}
	cells, err := json.Marshal(rows[0].Cells)
	if err != nil {
		return nil, err
	}
	b := append(append(ls.buf[:0], `{"cells":`...), cells...)
	if len(rows[0].Conditions) > 0 { // omitempty
		conds, err := json.Marshal(rows[0].Conditions)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"conditions":`...), conds...)
	}
	o, err := json.Marshal(object)
	if err != nil {
		return nil, err
	}
	b = append(append(b, `,"object":`...), o...)
	ls.buf = append(b, '}')
	return ls.buf, nil
}

// finish closes the list with its metadata.
func (ls *listStream) finish(lm metav1.ListMeta) error {
	if !ls.started {
		if err := ls.start(); err != nil {
			return err
		}
	}
	mj, err := json.Marshal(lm)
	if err != nil {
		return err
	}
	if _, err := ls.bw.WriteString(`],"metadata":`); err != nil {
		return err
	}
	if _, err := ls.bw.Write(mj); err != nil {
		return err
	}
	if _, err := ls.bw.WriteString("}\n"); err != nil {
		return err
	}
	return ls.bw.Flush()
}
