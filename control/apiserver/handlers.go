package apiserver

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	coordinationv1 "k8s.io/api/coordination/v1"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/control/authz"
	"github.com/isle-cluster/isle/control/registry"
)

// MaxBodyBytes bounds a request body, as Kubernetes' 3 MiB.
const MaxBodyBytes = 3 << 20

var parameterCodec = runtime.NewParameterCodec(registry.Scheme)

// optionsGV is where the option types (ListOptions, ...) are registered
// for query parameter decoding.
var optionsGV = schema.GroupVersion{Version: "v1"}

// readBody reads a bounded request body.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, apierrors.NewBadRequest("read the request body: " + err.Error())
	}
	if len(b) > MaxBodyBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d bytes", MaxBodyBytes))
	}
	return b, nil
}

// bodyFormat checks Content-Type for a create or update.
func bodyFormat(r *http.Request) (registry.Format, error) {
	mt, _, perr := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case r.Header.Get("Content-Type") == "" || (perr == nil && mt == "application/json"):
		return registry.FormatJSON, nil
	case perr == nil && (mt == "application/yaml" || mt == "application/x-yaml"):
		return registry.FormatYAML, nil
	case perr == nil && mt == "application/vnd.kubernetes.protobuf":
		return registry.FormatProtobuf, nil
	}
	return 0, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schemaGR(""), "",
		fmt.Sprintf("the body of the request was in an unknown format (%s); accepted media types: application/json, application/yaml, application/vnd.kubernetes.protobuf", r.Header.Get("Content-Type")), 0, false)
}

func fieldValidation(r *http.Request) (registry.FieldValidation, error) {
	switch v := r.URL.Query().Get("fieldValidation"); v {
	case "", "Warn":
		return registry.FieldValidationWarn, nil
	case "Strict", "Ignore":
		return registry.FieldValidation(v), nil
	default:
		return "", apierrors.NewBadRequest(fmt.Sprintf("fieldValidation %q: want Strict, Warn or Ignore", v))
	}
}

// writeOpts are a write's options, with the requester's admission and
// field manager; dryRun must be All, as kube-apiserver has it (422
// otherwise, naming the options' kind).
func (s *Server) writeOpts(r *http.Request) (registry.WriteOptions, error) {
	dryRun := r.URL.Query()["dryRun"]
	manager := r.URL.Query().Get("fieldManager")
	errs := metav1validation.ValidateDryRun(field.NewPath("dryRun"), dryRun)
	errs = append(errs, registry.ValidateManager(manager, field.NewPath("fieldManager"))...)
	if len(errs) > 0 {
		kind := map[string]string{http.MethodPost: "CreateOptions", http.MethodPut: "UpdateOptions", http.MethodPatch: "PatchOptions"}[r.Method]
		return registry.WriteOptions{}, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
	}
	return registry.WriteOptions{DryRun: len(dryRun) > 0, Admit: s.admission(userFrom(r.Context())),
		Manager: registry.ManagerFor(manager, r.UserAgent())}, nil
}

func addWarnings(w http.ResponseWriter, warnings []string) {
	for _, warn := range warnings {
		w.Header().Add("Warning", `299 - "`+strings.ReplaceAll(warn, `"`, `'`)+`"`)
	}
}

// serveResource serves one resource request after authorization.
func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, req request) {
	res := req.Resource
	if isProxy(req) {
		s.serveProxy(w, r, req)
		return
	}
	switch req.Subresource {
	case "":
	case "status":
		if !res.Status || !oneOf(req.Verb, "get", "update", "patch") {
			s.writeError(w, r, notFound())
			return
		}
	case "approval":
		if res.Approval == nil || !oneOf(req.Verb, "get", "update", "patch") {
			s.writeError(w, r, notFound())
			return
		}
	case "scale":
		if res.Scale != nil {
			s.serveScale(w, r, req)
			return
		}
		s.writeError(w, r, notFound())
		return
	case "token":
		if res.Group == "" && res.Resource == "serviceaccounts" && req.Verb == "create" {
			body, err := readBody(r)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			s.serveTokenRequest(w, r, req, body)
			return
		}
		s.writeError(w, r, notFound())
		return
	case "binding", "eviction":
		if res.Resource == "pods" && req.Verb == "create" {
			s.servePodSubresource(w, r, req)
			return
		}
		s.writeError(w, r, notFound())
		return
	case "log", "exec", "attach", "portforward":
		if res.Group == "" && res.Resource == "pods" {
			s.serveNodeProxy(w, r, req)
			return
		}
		s.writeError(w, r, notFound())
		return
	case "finalize":
		if res.Resource != "namespaces" || req.Verb != "update" {
			s.writeError(w, r, notFound())
			return
		}
		req.Subresource = ""
	default:
		s.writeError(w, r, notFound())
		return
	}
	switch req.Verb {
	case "get":
		var opts metav1.GetOptions
		if err := parameterCodec.DecodeParameters(r.URL.Query(), optionsGV, &opts); err != nil {
			s.writeError(w, r, apierrors.NewBadRequest(err.Error()))
			return
		}
		if err := checkResourceVersion(opts.ResourceVersion); err != nil {
			s.writeError(w, r, err)
			return
		}
		obj, err := s.store.Get(r.Context(), res, req.Namespace, req.Name, opts)
		if apierrors.IsNotFound(err) && s.cfg.NodeLease != nil && req.Namespace == authz.NodeLeaseNamespace &&
			res.Group == coordinationv1.GroupName && res.Resource == "leases" {
			if lease, ok := s.cfg.NodeLease(req.Name); ok {
				obj, err = lease, nil
			}
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeObject(w, r, http.StatusOK, res, obj)
	case "list":
		s.serveList(w, r, req)
	case "watch":
		s.serveWatch(w, r, req)
	case "create":
		s.serveCreate(w, r, req)
	case "update":
		s.serveUpdate(w, r, req)
	case "patch":
		s.servePatch(w, r, req)
	case "delete":
		s.serveDelete(w, r, req)
	case "deletecollection":
		s.serveDeleteCollection(w, r, req)
	default:
		s.writeError(w, r, apierrors.NewMethodNotSupported(res.GroupVersionResource.GroupResource(), r.Method))
	}
}

// listOptions are a list's or a watch's options, checked as
// kube-apiserver checks them: resourceVersionMatch and its
// resourceVersion (422), a resourceVersion that is no number (400).
func listOptions(r *http.Request) (metav1.ListOptions, error) {
	var opts metav1.ListOptions
	if err := parameterCodec.DecodeParameters(r.URL.Query(), optionsGV, &opts); err != nil {
		return opts, apierrors.NewBadRequest(err.Error())
	}
	var internal metainternalversion.ListOptions
	if err := metainternalversion.Convert_v1_ListOptions_To_internalversion_ListOptions(&opts, &internal, nil); err != nil {
		return opts, apierrors.NewBadRequest(fmt.Sprintf("labelSelector %q, fieldSelector %q: %v", opts.LabelSelector, opts.FieldSelector, err))
	}
	if errs := metainternalversionvalidation.ValidateListOptions(&internal, false); len(errs) > 0 {
		return opts, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	return opts, checkResourceVersion(opts.ResourceVersion)
}

// checkResourceVersion refuses a resourceVersion that is not a revision.
func checkResourceVersion(rv string) error {
	if rv == "" {
		return nil
	}
	if _, err := strconv.ParseUint(rv, 10, 64); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q: want a number", rv))
	}
	return nil
}

func (s *Server) decodeBody(r *http.Request, res *registry.Resource) (runtime.Object, []string, error) {
	format, err := bodyFormat(r)
	if err != nil {
		return nil, nil, err
	}
	mode, err := fieldValidation(r)
	if err != nil {
		return nil, nil, err
	}
	body, err := readBody(r)
	if err != nil {
		return nil, nil, err
	}
	return registry.Decode(res, body, format, mode)
}

func (s *Server) serveCreate(w http.ResponseWriter, r *http.Request, req request) {
	if req.Name != "" {
		s.writeError(w, r, apierrors.NewMethodNotSupported(req.Resource.GroupVersionResource.GroupResource(), "POST to a named object"))
		return
	}
	obj, warnings, err := s.decodeBody(r, req.Resource)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Creates are authorized here, once the object's name is known.
	req.Name = obj.(metav1.Object).GetName()
	if err := s.authorize(r, userFrom(r.Context()), req); err != nil {
		s.writeError(w, r, err)
		return
	}
	wopts, err := s.writeOpts(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := s.store.Create(r.Context(), req.Resource, req.Namespace, obj, wopts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	addWarnings(w, append(warnings, req.Resource.WarningsFor(out)...))
	s.writeObject(w, r, http.StatusCreated, req.Resource, out)
}

func (s *Server) serveUpdate(w http.ResponseWriter, r *http.Request, req request) {
	wopts, err := s.writeOpts(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	obj, warnings, err := s.decodeBody(r, req.Resource)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := s.store.Update(r.Context(), req.Resource, req.Namespace, req.Name, req.Subresource, obj, wopts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	addWarnings(w, append(warnings, req.Resource.WarningsFor(out)...))
	s.writeObject(w, r, http.StatusOK, req.Resource, out)
}

func patchType(r *http.Request) (types.PatchType, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil {
		switch pt := types.PatchType(mt); pt {
		case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyYAMLPatchType:
			return pt, nil
		}
	}
	return "", apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", schemaGR(""), "",
		fmt.Sprintf("the body of the request was in an unknown format (%s); accepted media types: %s, %s, %s, %s",
			r.Header.Get("Content-Type"), types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyYAMLPatchType), 0, false)
}

func (s *Server) servePatch(w http.ResponseWriter, r *http.Request, req request) {
	pt, err := patchType(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	mode, err := fieldValidation(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wopts, err := s.writeOpts(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := applyOptions(r, pt, &wopts); err != nil {
		s.writeError(w, r, err)
		return
	}
	code := http.StatusOK
	var out runtime.Object
	var warnings []string
	if pt == types.ApplyYAMLPatchType {
		var created bool
		out, created, warnings, err = s.store.Apply(r.Context(), req.Resource, req.Namespace, req.Name, req.Subresource, body, mode, wopts)
		if created {
			code = http.StatusCreated
		}
	} else {
		out, warnings, err = s.store.Patch(r.Context(), req.Resource, req.Namespace, req.Name, req.Subresource, pt, body, mode, wopts)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	addWarnings(w, append(warnings, req.Resource.WarningsFor(out)...))
	s.writeObject(w, r, code, req.Resource, out)
}

// applyOptions reads force and checks the options of a server-side apply
// as kube-apiserver does: an apply names its field manager; force is for
// applies alone.
func applyOptions(r *http.Request, pt types.PatchType, opts *registry.WriteOptions) error {
	q := r.URL.Query()
	var errs field.ErrorList
	switch v := q.Get("force"); v {
	case "", "false":
	case "true":
		opts.Force = true
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("force %q: want true or false", v))
	}
	apply := pt == types.ApplyYAMLPatchType
	if apply && q.Get("fieldManager") == "" {
		errs = append(errs, field.Required(field.NewPath("fieldManager"), "is required for apply patch"))
	}
	if !apply && opts.Force {
		errs = append(errs, field.Forbidden(field.NewPath("force"), "may not be specified for non-apply patch"))
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs)
	}
	return nil
}

func deleteOptions(r *http.Request) (metav1.DeleteOptions, error) {
	var opts metav1.DeleteOptions
	body, err := readBody(r)
	if err != nil {
		return opts, err
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if _, _, err := registry.Codecs().Decode(body, nil, &opts); err != nil {
			return opts, apierrors.NewBadRequest("decode DeleteOptions: " + err.Error())
		}
	}
	if err := parameterCodec.DecodeParameters(r.URL.Query(), optionsGV, &opts); err != nil {
		return opts, apierrors.NewBadRequest(err.Error())
	}
	return opts, nil
}

func (s *Server) serveDelete(w http.ResponseWriter, r *http.Request, req request) {
	opts, err := deleteOptions(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	obj, deleted, err := s.store.Delete(r.Context(), req.Resource, req.Namespace, req.Name, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if deleted && req.Resource.Resource != "pods" {
		m := obj.(metav1.Object)
		writeBody(w, http.StatusOK, negotiate(r), &metav1.Status{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
			Status:   metav1.StatusSuccess,
			Details:  &metav1.StatusDetails{Name: m.GetName(), Group: req.Resource.Group, Kind: req.Resource.Resource, UID: m.GetUID()},
		})
		return
	}
	s.writeObject(w, r, http.StatusOK, req.Resource, obj)
}

func (s *Server) serveDeleteCollection(w http.ResponseWriter, r *http.Request, req request) {
	lopts, err := listOptions(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	dopts, err := deleteOptions(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, err := s.store.DeleteCollection(r.Context(), req.Resource, req.Namespace, lopts, dopts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeObject(w, r, http.StatusOK, req.Resource, list)
}

func (s *Server) serveScale(w http.ResponseWriter, r *http.Request, req request) {
	var sc *autoscalingv1.Scale
	var err error
	var wopts registry.WriteOptions
	if req.Verb == "update" || req.Verb == "patch" {
		if wopts, err = s.writeOpts(r); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	switch req.Verb {
	case "get":
		sc, err = s.store.GetScale(r.Context(), req.Resource, req.Namespace, req.Name)
	case "update":
		var body []byte
		if body, err = readBody(r); err == nil {
			sc = &autoscalingv1.Scale{}
			if _, _, derr := registry.Codecs().Decode(body, nil, sc); derr != nil {
				err = apierrors.NewBadRequest("decode Scale: " + derr.Error())
			} else {
				sc, err = s.store.UpdateScale(r.Context(), req.Resource, req.Namespace, req.Name, sc, "", nil, wopts)
			}
		}
	case "patch":
		var pt types.PatchType
		if pt, err = patchType(r); err == nil {
			var body []byte
			if body, err = readBody(r); err == nil {
				sc, err = s.store.UpdateScale(r.Context(), req.Resource, req.Namespace, req.Name, nil, pt, body, wopts)
			}
		}
	default:
		err = notFound()
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeBody(w, http.StatusOK, negotiate(r), sc)
}

// servePodSubresource serves pods/binding (the scheduler's) and
// pods/eviction (kubectl drain's).
func (s *Server) servePodSubresource(w http.ResponseWriter, r *http.Request, req request) {
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	switch req.Subresource {
	case "binding":
		var b corev1.Binding
		if _, _, err := registry.Codecs().Decode(body, nil, &b); err != nil {
			s.writeError(w, r, apierrors.NewBadRequest("decode Binding: "+err.Error()))
			return
		}
		if err := s.store.Bind(r.Context(), req.Namespace, req.Name, &b); err != nil {
			s.writeError(w, r, err)
			return
		}
		writeBody(w, http.StatusCreated, negotiate(r), &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
	case "eviction":
		var ev policyv1.Eviction
		if _, _, err := registry.Codecs().Decode(body, nil, &ev); err != nil {
			s.writeError(w, r, apierrors.NewBadRequest("decode Eviction: "+err.Error()))
			return
		}
		if ev.Name != "" && ev.Name != req.Name {
			s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("name in URL does not match name in Eviction object: %s, %s", req.Name, ev.Name)))
			return
		}
		if err := s.evict(r.Context(), req, &ev); err != nil {
			s.writeError(w, r, err)
			return
		}
		writeBody(w, http.StatusCreated, negotiate(r), &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
	}
}

func notFound() error {
	return apierrors.NewGenericServerResponse(http.StatusNotFound, "", schemaGR(""), "", "the server could not find the requested resource", 0, false)
}

func oneOf(s string, options ...string) bool {
	for _, o := range options {
		if s == o {
			return true
		}
	}
	return false
}
