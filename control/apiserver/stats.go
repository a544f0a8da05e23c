package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/control/authz"
	resourcemetrics "github.com/isle-cluster/isle/control/metrics"
	"github.com/isle-cluster/isle/control/wire"
)

// serveReport receives a node agent's usage report (POST
// wire.ReportPath, package metrics) and keeps it in this server's
// cache. Only nodes may report, each its own usage and its own pods'.
func (s *Server) serveReport(w http.ResponseWriter, r *http.Request, u *User) {
	if r.Method != http.MethodPost {
		s.writeError(w, r, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "stats"}, r.Method))
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			s.writeError(w, r, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schemaGR(""), "",
				fmt.Sprintf("the body of the request was in an unknown format (%s); accepted media types: application/json", ct), 0, false))
			return
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, wire.MaxReportBytes+1))
	if err != nil {
		s.writeError(w, r, apierrors.NewBadRequest("read the request body: "+err.Error()))
		return
	}
	err = s.cfg.Usage.Receive(authz.NodeName(u), body, s.podLookup(r.Context()))
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, resourcemetrics.ErrForbidden):
		s.writeError(w, r, apierrors.NewForbidden(schema.GroupResource{}, "", err))
	case errors.Is(err, resourcemetrics.ErrTooLarge):
		s.writeError(w, r, apierrors.NewRequestEntityTooLargeError(err.Error()))
	default:
		s.writeError(w, r, apierrors.NewBadRequest(err.Error()))
	}
}

// podLookup finds pods in this server's copy of the store: a pod bound a
// moment ago may not be there yet, and is skipped until the next report.
func (s *Server) podLookup(ctx context.Context) resourcemetrics.PodLookup {
	pods := s.mustResource(corev1.SchemeGroupVersion.WithResource("pods"))
	return func(ns, name string) (types.UID, string, bool) {
		obj, err := s.store.Get(ctx, pods, ns, name, metav1.GetOptions{ResourceVersion: "0"})
		if err != nil {
			return "", "", false
		}
		p := obj.(*corev1.Pod)
		return p.UID, p.Spec.NodeName, true
	}
}
