// Package csrsigning signs the approved CertificateSigningRequests of the
// kubernetes.io/kube-apiserver-client signer with the cluster CA
// (kube-controller-manager's csrsigning for that signer) and deletes old
// requests as its csrcleaner does.
package csrsigning

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// Name is the controller's name in the table.
const Name = "csrsigning"

// Signer is the signer this controller serves.
const Signer = certificatesv1.KubeAPIServerClientSignerName

// Sign signs a client certificate for req, valid for validity.
type Sign func(req *x509.CertificateRequest, validity time.Duration, now time.Time) ([]byte, error)

// As upstream: a certificate is valid a year at most; requests are
// deleted an hour after they are decided (or their certificate expired),
// a day after they were made if never decided.
const (
	maxValidity     = 365 * 24 * time.Hour
	decidedLifetime = time.Hour
	pendingLifetime = 24 * time.Hour
	cleanEvery      = time.Minute
)

// Controller signs and cleans up.
type Controller struct {
	store *registry.Store
	log   *slog.Logger
	sign  Sign
	now   func() time.Time
}

// New returns the controller; without sign it does not run.
func New(store *registry.Store, log *slog.Logger, sign Sign) *Controller {
	return &Controller{store: store, log: log, sign: sign, now: time.Now}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return Name }

// Run signs and cleans up until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	if c.sign == nil {
		return
	}
	res := kit.MustLookup(c.store, certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests"))
	loop := kit.Loop{Store: c.store, Log: c.log, Name: Name, ResyncEvery: cleanEvery, Resync: func() { c.clean(ctx, res) }}
	loop.Run(ctx, kit.WatchOf(res, nil, func(typ watch.EventType, csr *certificatesv1.CertificateSigningRequest) {
		if typ != watch.Deleted {
			c.sync(ctx, res, csr)
		}
	}))
}

func has(c *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	return slices.ContainsFunc(c.Status.Conditions, func(cond certificatesv1.CertificateSigningRequestCondition) bool {
		return cond.Type == t && cond.Status == corev1.ConditionTrue
	})
}

// sync signs csr if it is of Signer, approved, not failed and not issued.
func (c *Controller) sync(ctx context.Context, res *registry.Resource, csr *certificatesv1.CertificateSigningRequest) {
	if csr.Spec.SignerName != Signer || !has(csr, certificatesv1.CertificateApproved) || has(csr, certificatesv1.CertificateFailed) ||
		len(csr.Status.Certificate) > 0 {
		return
	}
	now := c.now()
	cert, failure := c.issue(csr, now)
	_, err := c.store.Mutate(ctx, res, "", csr.Name, "status", func(obj runtime.Object) error {
		cur := obj.(*certificatesv1.CertificateSigningRequest)
		if cur.UID != csr.UID || len(cur.Status.Certificate) > 0 || has(cur, certificatesv1.CertificateFailed) {
			return errNothing
		}
		if failure != nil {
			t := metav1.NewTime(now)
			cur.Status.Conditions = append(cur.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateFailed,
				Status: corev1.ConditionTrue, Reason: "SignerValidationFailure", Message: failure.Error(), LastUpdateTime: t, LastTransitionTime: t})
			return nil
		}
		cur.Status.Certificate = cert
		return nil
	})
	switch {
	case errors.Is(err, errNothing), apierrors.IsNotFound(err):
	case err != nil:
		c.log.Warn("csrsigning: the request's status", "csr", csr.Name, "err", err)
	case failure != nil:
		c.log.Info("csrsigning: request refused", "csr", csr.Name, "reason", failure)
	default:
		c.log.Info("csrsigning: certificate issued", "csr", csr.Name, "requestor", csr.Spec.Username)
	}
}

var errNothing = errors.New("nothing to do")

// issue checks the request as upstream's kube-apiserver-client signer
// does and signs it.
func (c *Controller) issue(csr *certificatesv1.CertificateSigningRequest, now time.Time) ([]byte, error) {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		return nil, errors.New("the request is not PEM")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the request: %w", err)
	}
	if !slices.Contains(csr.Spec.Usages, certificatesv1.UsageClientAuth) {
		return nil, errors.New("usages must include client auth")
	}
	for _, u := range csr.Spec.Usages {
		if !slices.Contains([]certificatesv1.KeyUsage{certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment}, u) {
			return nil, fmt.Errorf("usage %q is not allowed for %s: only client auth, digital signature and key encipherment", u, Signer)
		}
	}
	if len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0 {
		return nil, errors.New("a client certificate names no DNS names, IP addresses, email addresses or URIs")
	}
	validity := maxValidity
	if e := csr.Spec.ExpirationSeconds; e != nil {
		validity = min(validity, time.Duration(*e)*time.Second)
	}
	return c.sign(req, validity, now)
}

// clean deletes the requests that have served their time.
func (c *Controller) clean(ctx context.Context, res *registry.Resource) {
	list, err := c.store.List(ctx, res, "", metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return
	}
	now := c.now()
	for _, csr := range list.(*certificatesv1.CertificateSigningRequestList).Items {
		if !expired(&csr, now) {
			continue
		}
		pre := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &csr.UID}}
		if _, _, err := c.store.Delete(ctx, res, "", csr.Name, pre); err == nil {
			c.log.Info("csrsigning: old request deleted", "csr", csr.Name)
		}
	}
}

// expired reports whether csr has been kept long enough.
func expired(csr *certificatesv1.CertificateSigningRequest, now time.Time) bool {
	decidedAt := time.Time{}
	for _, cond := range csr.Status.Conditions {
		if cond.Type == certificatesv1.CertificateApproved || cond.Type == certificatesv1.CertificateDenied || cond.Type == certificatesv1.CertificateFailed {
			at := cond.LastUpdateTime.Time
			if at.IsZero() {
				at = csr.CreationTimestamp.Time
			}
			if at.After(decidedAt) {
				decidedAt = at
			}
		}
	}
	if block, _ := pem.Decode(csr.Status.Certificate); block != nil {
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil && now.After(cert.NotAfter) {
			return true
		}
	}
	if !decidedAt.IsZero() {
		return now.Sub(decidedAt) > decidedLifetime
	}
	return now.Sub(csr.CreationTimestamp.Time) > pendingLifetime
}
