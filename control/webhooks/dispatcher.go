// Package webhooks calls the cluster's admission webhooks
// (admissionregistration.k8s.io/v1 Mutating and
// ValidatingWebhookConfigurations) on every write of the store, as
// kube-apiserver's MutatingAdmissionWebhook and ValidatingAdmissionWebhook
// plugins do, and posts to conversion webhooks for the CRDs.
package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// Dispatcher follows the webhook configurations and calls the webhooks a
// write matches: mutating ones in turn, validating ones at once. It is a
// registry.Webhooks; every server runs one.
type Dispatcher struct {
	store  *registry.Store
	log    *slog.Logger
	client *Client
	hooks  atomic.Pointer[hookSet]
	mres   *registry.Resource
	vres   *registry.Resource
}

// hookSet is the webhooks in force, in kube-apiserver's order: by
// configuration name, then as listed.
type hookSet struct {
	mutating, validating []*hook
}

// NewDispatcher returns a Dispatcher of the configurations in store,
// posting with client.
func NewDispatcher(store *registry.Store, client *Client, log *slog.Logger) *Dispatcher {
	return &Dispatcher{store: store, log: log, client: client,
		mres: kit.MustLookup(store, admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingwebhookconfigurations")),
		vres: kit.MustLookup(store, admissionregistrationv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations")),
	}
}

// Run follows the configurations until ctx ends: each change is in force
// for the next write.
func (d *Dispatcher) Run(ctx context.Context) {
	d.reload(ctx)
	loop := kit.Loop{Store: d.store, Log: d.log, Name: "webhooks"}
	reload := func(watch.EventType, runtime.Object) { d.reload(ctx) }
	loop.Run(ctx,
		kit.WatchOf(d.mres, func() { d.reload(ctx) }, reload),
		kit.WatchOf(d.vres, func() { d.reload(ctx) }, reload))
}

// reload reads the configurations again: they change seldom, and a new
// set replaces the old at once, never leaving a moment without webhooks.
func (d *Dispatcher) reload(ctx context.Context) {
	set := &hookSet{}
	ml, err := d.store.List(ctx, d.mres, "", metav1.ListOptions{})
	if err != nil {
		d.log.Warn("webhooks: listing the mutating webhook configurations failed", "err", err)
		return
	}
	vl, err := d.store.List(ctx, d.vres, "", metav1.ListOptions{})
	if err != nil {
		d.log.Warn("webhooks: listing the validating webhook configurations failed", "err", err)
		return
	}
	mcs := ml.(*admissionregistrationv1.MutatingWebhookConfigurationList).Items
	slices.SortFunc(mcs, func(a, b admissionregistrationv1.MutatingWebhookConfiguration) int { return cmpString(a.Name, b.Name) })
	for _, c := range mcs {
		for _, w := range c.Webhooks {
			h, err := newHook(c.Name, w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector,
				w.ObjectSelector, w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, len(w.MatchConditions))
			if err != nil {
				d.log.Warn("webhooks: a webhook left out", "configuration", c.Name, "webhook", w.Name, "err", err)
				continue
			}
			h.mutating = true
			h.reinvoke = w.ReinvocationPolicy != nil && *w.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy
			set.mutating = append(set.mutating, h)
		}
	}
	vcs := vl.(*admissionregistrationv1.ValidatingWebhookConfigurationList).Items
	slices.SortFunc(vcs, func(a, b admissionregistrationv1.ValidatingWebhookConfiguration) int {
		return cmpString(a.Name, b.Name)
	})
	for _, c := range vcs {
		for _, w := range c.Webhooks {
			h, err := newHook(c.Name, w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector,
				w.ObjectSelector, w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, len(w.MatchConditions))
			if err != nil {
				d.log.Warn("webhooks: a webhook left out", "configuration", c.Name, "webhook", w.Name, "err", err)
				continue
			}
			set.validating = append(set.validating, h)
		}
	}
	d.hooks.Store(set)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func newHook(config, name string, cc admissionregistrationv1.WebhookClientConfig, rules []admissionregistrationv1.RuleWithOperations,
	fp *admissionregistrationv1.FailurePolicyType, mp *admissionregistrationv1.MatchPolicyType, nsSel, objSel *metav1.LabelSelector,
	se *admissionregistrationv1.SideEffectClass, timeout *int32, versions []string, conditions int) (*hook, error) {
	h := &hook{id: config + "/" + name, name: name, client: cc, rules: rules, versions: versions, conditions: conditions,
		failOpen: fp != nil && *fp == admissionregistrationv1.Ignore,
		exact:    mp != nil && *mp == admissionregistrationv1.Exact,
		dryRunOK: se != nil && (*se == admissionregistrationv1.SideEffectClassNone || *se == admissionregistrationv1.SideEffectClassNoneOnDryRun),
		timeout:  10, nsSel: labels.Everything(), objSel: labels.Everything()}
	if timeout != nil {
		h.timeout = *timeout
	}
	var err error
	if nsSel != nil {
		if h.nsSel, err = metav1.LabelSelectorAsSelector(nsSel); err != nil {
			return nil, fmt.Errorf("namespaceSelector: %w", err)
		}
	}
	if objSel != nil {
		if h.objSel, err = metav1.LabelSelectorAsSelector(objSel); err != nil {
			return nil, fmt.Errorf("objectSelector: %w", err)
		}
	}
	return h, nil
}

// callError is a webhook that could not be called or gave no valid
// answer: its failure policy decides.
type callError struct {
	name string
	err  error
}

func (e *callError) Error() string {
	return fmt.Sprintf("failed calling webhook %q: %v", e.name, e.err)
}

// failed applies h's failure policy to a call's error: nil to go on
// (Ignore), else the request's error.
func (d *Dispatcher) failed(ctx context.Context, h *hook, err error) error {
	var ce *callError
	if !errors.As(err, &ce) {
		return err
	}
	if h.failOpen {
		d.log.Warn("webhooks: a webhook failed; the request goes on (failurePolicy Ignore)", "webhook", h.id, "err", err)
		if ctx.Err() != nil {
			return apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
		}
		return nil
	}
	d.log.Warn("webhooks: a webhook failed; the request fails (failurePolicy Fail)", "webhook", h.id, "err", err)
	return apierrors.NewInternalError(err)
}

// Any reports whether any webhook is in force.
func (d *Dispatcher) Any() bool {
	set := d.hooks.Load()
	return set != nil && len(set.mutating)+len(set.validating) > 0
}

// Mutate calls the mutating webhooks req matches, in order, each given
// the object as the ones before left it; those with reinvocationPolicy
// IfNeeded are called once more if a later one changed the object.
func (d *Dispatcher) Mutate(ctx context.Context, req *registry.AdmissionRequest) (runtime.Object, error) {
	set := d.hooks.Load()
	if set == nil || len(set.mutating) == 0 || exempt(req.Resource) {
		return req.Object, nil
	}
	obj := req.Object
	version, seen := 0, map[int]int{} // changes made, and how many each webhook had seen
	for pass := 0; pass < 2; pass++ {
		for i, h := range set.mutating {
			if pass == 1 {
				if v, called := seen[i]; !h.reinvoke || !called || v == version {
					continue
				}
			}
			r := *req
			r.Object = obj
			inv, err := d.match(ctx, h, &r)
			if err != nil {
				return nil, err
			}
			if inv == nil {
				continue
			}
			out, err := d.call(ctx, inv, &r)
			if err = d.failed(ctx, h, err); err != nil {
				return nil, err
			}
			if out != nil {
				obj = out
				version++
			}
			seen[i] = version
		}
		if version == 0 {
			break
		}
	}
	return obj, nil
}

// Validate calls the validating webhooks req matches, all at once; the
// first in order that refuses (or fails closed) decides the answer.
func (d *Dispatcher) Validate(ctx context.Context, req *registry.AdmissionRequest) error {
	set := d.hooks.Load()
	if set == nil || len(set.validating) == 0 || exempt(req.Resource) {
		return nil
	}
	var invs []*invocation
	for _, h := range set.validating {
		inv, err := d.match(ctx, h, req)
		if err != nil {
			return err
		}
		if inv != nil {
			invs = append(invs, inv)
		}
	}
	errs := make([]error, len(invs))
	var wg sync.WaitGroup
	for i, inv := range invs {
		wg.Go(func() {
			_, err := d.call(ctx, inv, req)
			errs[i] = d.failed(ctx, inv.h, err)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// call sends req to inv's webhook and returns the object as its patch
// leaves it (nil: unchanged), or why it refused or failed (a *callError).
func (d *Dispatcher) call(ctx context.Context, inv *invocation, req *registry.AdmissionRequest) (runtime.Object, error) {
	h := inv.h
	if h.conditions > 0 {
		return nil, &callError{h.name, errConditions}
	}
	if req.DryRun && !h.dryRunOK {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("admission webhook %q does not support dry run", h.name))
	}
	version, ok := reviewVersion(h.versions)
	if !ok {
		return nil, &callError{h.name, fmt.Errorf("none of its admissionReviewVersions %v is known (v1, v1beta1)", h.versions)}
	}
	review, sent, err := d.review(inv, req, version)
	if err != nil {
		return nil, &callError{h.name, fmt.Errorf("could not create admission objects: %w", err)}
	}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, &callError{h.name, err}
	}
	start := time.Now()
	answer, err := d.client.Post(ctx, h.client, time.Duration(h.timeout)*time.Second, body)
	if err != nil {
		return nil, &callError{h.name, fmt.Errorf("failed to call webhook: %w", err)}
	}
	resp, err := readReview(answer, version, review.Request.UID)
	if err != nil {
		return nil, &callError{h.name, fmt.Errorf("received invalid webhook response: %w", err)}
	}
	d.log.Debug("webhooks: called", "webhook", h.id, "operation", req.Operation, "resource", inv.res.String(),
		"allowed", resp.Allowed, "took", time.Since(start))
	for _, w := range resp.Warnings {
		registry.AddWarning(ctx, w)
	}
	if !resp.Allowed {
		return nil, denied(h.name, resp.Result)
	}
	if len(resp.Patch) == 0 {
		return nil, nil
	}
	if !h.mutating {
		return nil, nil // a validating webhook's patch is ignored
	}
	if req.Object == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("admission webhook %q attempted to modify the object, which is not supported for this operation", h.name))
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		return nil, &callError{h.name, fmt.Errorf("unsupported patch type %v", resp.PatchType)}
	}
	return d.applyPatch(inv, req, sent, resp.Patch)
}

// reviewVersion is the first AdmissionReview version of versions isle
// speaks.
func reviewVersion(versions []string) (string, bool) {
	for _, v := range versions {
		if v == "v1" || v == "v1beta1" {
			return v, true
		}
	}
	return "", false
}

// denied is the request's error for a webhook's refusal, as
// kube-apiserver words it; its code is the webhook's, at least 400.
func denied(name string, result *metav1.Status) error {
	st := metav1.Status{Status: metav1.StatusFailure}
	if result != nil {
		st = *result
	}
	if st.Code < http.StatusBadRequest {
		st.Code = http.StatusBadRequest
	}
	if st.Status == "" || st.Status == metav1.StatusSuccess {
		st.Status = metav1.StatusFailure
	}
	by := fmt.Sprintf("admission webhook %q denied the request", name)
	switch {
	case st.Message != "":
		st.Message = by + ": " + st.Message
	case st.Reason != "":
		st.Message = by + ": " + string(st.Reason)
	default:
		st.Message = by + " without explanation"
	}
	return &apierrors.StatusError{ErrStatus: st}
}

// review builds the AdmissionReview of req for inv's webhook, and the
// object's JSON as sent.
func (d *Dispatcher) review(inv *invocation, req *registry.AdmissionRequest, version string) (*admissionv1.AdmissionReview, []byte, error) {
	obj, old := req.Object, req.Old
	var err error
	if inv.res != req.Resource && req.Subresource != "scale" {
		if obj, err = convert(req.Resource, obj, inv.res); err != nil {
			return nil, nil, err
		}
		if old, err = convert(req.Resource, old, inv.res); err != nil {
			return nil, nil, err
		}
	}
	ref := obj
	if ref == nil {
		ref = old
	}
	gvk := gvkOf(inv.res, req.Subresource, ref)
	rgvk := gvkOf(req.Resource, req.Subresource, ref)
	dryRun := req.DryRun
	ar := &admissionv1.AdmissionRequest{
		UID:                uuid.NewUUID(),
		Kind:               metav1.GroupVersionKind(gvk),
		Resource:           metav1.GroupVersionResource(inv.res.GroupVersionResource),
		SubResource:        req.Subresource,
		RequestKind:        ptr(metav1.GroupVersionKind(rgvk)),
		RequestResource:    ptr(metav1.GroupVersionResource(req.Resource.GroupVersionResource)),
		RequestSubResource: req.Subresource,
		Name:               req.Name,
		Namespace:          req.Namespace,
		Operation:          admissionv1.Operation(req.Operation),
		UserInfo:           req.User,
		DryRun:             &dryRun,
	}
	var sent []byte
	if obj != nil {
		if sent, err = encode(obj, gvk); err != nil {
			return nil, nil, err
		}
		ar.Object.Raw = sent
	}
	if old != nil {
		if ar.OldObject.Raw, err = encode(old, gvk); err != nil {
			return nil, nil, err
		}
	}
	if req.Options != nil {
		if ar.Options.Raw, err = json.Marshal(req.Options); err != nil {
			return nil, nil, err
		}
	}
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.Group + "/" + version, Kind: "AdmissionReview"},
		Request:  ar,
	}, sent, nil
}

func ptr[T any](v T) *T { return &v }

// convert shows obj of resource from as an object of resource to.
func convert(from *registry.Resource, obj runtime.Object, to *registry.Resource) (runtime.Object, error) {
	if obj == nil {
		return nil, nil
	}
	conv := to.Convert
	if conv == nil {
		conv = from.Convert
	}
	if conv == nil {
		return nil, fmt.Errorf("%s cannot be shown as %s", from, to)
	}
	return conv(obj.DeepCopyObject(), to.GroupVersion())
}

// encode is obj's JSON with its apiVersion and kind.
func encode(obj runtime.Object, gvk schema.GroupVersionKind) ([]byte, error) {
	c := obj.DeepCopyObject()
	c.GetObjectKind().SetGroupVersionKind(gvk)
	return json.Marshal(c)
}

// readReview decodes a webhook's AdmissionReview answer to the request
// uid: for v1 it must name its version and kind and answer that uid.
func readReview(data []byte, version string, uid types.UID) (*admissionv1.AdmissionResponse, error) {
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &ar); err != nil {
		return nil, err
	}
	if ar.Response == nil {
		return nil, errors.New("no response in the AdmissionReview")
	}
	if version == "v1" {
		if want := admissionv1.SchemeGroupVersion.String(); ar.APIVersion != want || ar.Kind != "AdmissionReview" {
			return nil, fmt.Errorf("expected webhook response of %s, Kind=AdmissionReview, got %s, Kind=%s", want, ar.APIVersion, ar.Kind)
		}
		if ar.Response.UID != uid {
			return nil, fmt.Errorf("expected response.uid=%q, got %q", uid, ar.Response.UID)
		}
	}
	return ar.Response, nil
}

// applyPatch applies a webhook's JSON patch to the object as sent and
// decodes the result as the request's object, in its own version.
func (d *Dispatcher) applyPatch(inv *invocation, req *registry.AdmissionRequest, sent, patch []byte) (runtime.Object, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, &callError{inv.h.name, fmt.Errorf("received undecodable patch in webhook response: %w", err)}
	}
	patched, err := p.Apply(sent)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("admission webhook %q: its patch does not apply: %w", inv.h.name, err))
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(patched, &tm); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var want metav1.TypeMeta
	_ = json.Unmarshal(sent, &want)
	if tm.APIVersion != want.APIVersion || tm.Kind != want.Kind {
		return nil, apierrors.NewInternalError(fmt.Errorf("admission webhook %q changed the object's kind from %s %s to %s %s",
			inv.h.name, want.APIVersion, want.Kind, tm.APIVersion, tm.Kind))
	}
	var out runtime.Object
	switch {
	case req.Subresource == "scale":
		out = &autoscalingv1.Scale{}
	case inv.res != req.Resource:
		out = inv.res.New()
	default:
		out = req.Resource.New()
	}
	if err := json.Unmarshal(patched, out); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("admission webhook %q: the patched object: %w", inv.h.name, err))
	}
	if inv.res != req.Resource && req.Subresource != "scale" {
		if out, err = convert(inv.res, out, req.Resource); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	out.GetObjectKind().SetGroupVersionKind(req.Object.GetObjectKind().GroupVersionKind())
	return out, nil
}
