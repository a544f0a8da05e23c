package crd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// Poster posts to a webhook (package webhooks' Client): the conversion
// webhooks' way out.
type Poster interface {
	Post(ctx context.Context, cc admissionregistrationv1.WebhookClientConfig, timeout time.Duration, body []byte) ([]byte, error)
}

// conversionTimeout is kube-apiserver's bound on a conversion webhook's
// answer.
const conversionTimeout = 30 * time.Second

// The ConversionReview of apiextensions.k8s.io/v1, as a conversion
// webhook reads and writes it.
type ConversionReview struct {
	metav1.TypeMeta `json:",inline"`
	Request         *ConversionRequest  `json:"request,omitempty"`
	Response        *ConversionResponse `json:"response,omitempty"`
}

// ConversionRequest asks for objects in another version.
type ConversionRequest struct {
	UID               types.UID              `json:"uid"`
	DesiredAPIVersion string                 `json:"desiredAPIVersion"`
	Objects           []runtime.RawExtension `json:"objects"`
}

// ConversionResponse is a webhook's answer.
type ConversionResponse struct {
	UID              types.UID              `json:"uid"`
	ConvertedObjects []runtime.RawExtension `json:"convertedObjects"`
	Result           metav1.Status          `json:"result"`
}

// webhookConverter converts c's objects between versions by its
// conversion webhook: the webhook may change anything but the object's
// metadata beyond its labels and annotations.
func webhookConverter(c *CustomResourceDefinition, poster Poster) func(obj runtime.Object, to schema.GroupVersion) (runtime.Object, error) {
	w := c.Spec.Conversion.Webhook
	cc := admissionregistrationv1.WebhookClientConfig{URL: w.ClientConfig.URL, CABundle: w.ClientConfig.CABundle}
	if s := w.ClientConfig.Service; s != nil {
		cc.Service = &admissionregistrationv1.ServiceReference{Namespace: s.Namespace, Name: s.Name, Path: s.Path, Port: s.Port}
	}
	return func(obj runtime.Object, to schema.GroupVersion) (runtime.Object, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("crd: convert %T: not a custom object", obj)
		}
		if u.GetAPIVersion() == to.String() {
			return u.DeepCopy(), nil
		}
		out, err := convertByWebhook(poster, cc, u, to)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("conversion webhook for %s failed: %w", u.GroupVersionKind(), err))
		}
		return out, nil
	}
}

func convertByWebhook(poster Poster, cc admissionregistrationv1.WebhookClientConfig, u *unstructured.Unstructured, to schema.GroupVersion) (*unstructured.Unstructured, error) {
	raw, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	uid := uuid.NewUUID()
	body, err := json.Marshal(&ConversionReview{TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request: &ConversionRequest{UID: uid, DesiredAPIVersion: to.String(), Objects: []runtime.RawExtension{{Raw: raw}}}})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), conversionTimeout)
	defer cancel()
	answer, err := poster.Post(ctx, cc, conversionTimeout, body)
	if err != nil {
		return nil, err
	}
	var review ConversionReview
	if err := json.Unmarshal(answer, &review); err != nil {
		return nil, fmt.Errorf("the answer: %w", err)
	}
	resp := review.Response
	switch {
	case resp == nil:
		return nil, errors.New("no response in the ConversionReview")
	case resp.UID != uid:
		return nil, fmt.Errorf("expected response.uid=%q, got %q", uid, resp.UID)
	case resp.Result.Status != metav1.StatusSuccess:
		return nil, fmt.Errorf("conversion failed: %s", resp.Result.Message)
	case len(resp.ConvertedObjects) != 1:
		return nil, fmt.Errorf("expected 1 converted object, got %d", len(resp.ConvertedObjects))
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(resp.ConvertedObjects[0].Raw); err != nil {
		return nil, fmt.Errorf("the converted object: %w", err)
	}
	if out.GetAPIVersion() != to.String() {
		return nil, fmt.Errorf("the converted object has apiVersion %q, want %q", out.GetAPIVersion(), to.String())
	}
	if out.GetKind() != u.GetKind() {
		return nil, fmt.Errorf("the converted object has kind %q, want %q", out.GetKind(), u.GetKind())
	}
	// The metadata stays the server's, but for labels and annotations.
	labels, annotations := out.GetLabels(), out.GetAnnotations()
	if m, ok := u.Object["metadata"].(map[string]any); ok {
		out.Object["metadata"] = runtime.DeepCopyJSONValue(m)
	}
	out.SetLabels(labels)
	out.SetAnnotations(annotations)
	return out, nil
}
