// Package caexpiry warns of the cluster CA's end a year ahead
// (pki.CAWarning): while the CA is within that year, the leader records a
// Warning Event, reason CACertificateExpiring, about the kube-root-ca.crt
// ConfigMap of the default namespace (which holds the CA), so `kubectl get
// events` shows it. The servers' isle_certificate_expiry_seconds{certificate="ca"}
// and `isle certs check` say the same.
package caexpiry

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/isle-cluster/isle/control/controllers/rootca"
	"github.com/isle-cluster/isle/control/events"
	"github.com/isle-cluster/isle/control/pki"
)

// Reason is the Event's reason.
const Reason = "CACertificateExpiring"

// Config configures the Controller.
type Config struct {
	// CA returns the cluster CA's certificate (the one that signs, which
	// a rotation replaces). Required.
	CA func() *x509.Certificate
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Every is how often the CA is looked at: within the Events' TTL (an
	// hour), so the Event lasts as long as the cause. Default 30 minutes.
	Every time.Duration
}

// Controller records the Event while the CA is within pki.CAWarning of its
// end. It runs on the leader.
type Controller struct {
	cfg Config
	log *slog.Logger
	rec *events.Recorder
}

// New returns the Controller.
func New(cfg Config, log *slog.Logger, rec *events.Recorder) *Controller {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Every <= 0 {
		cfg.Every = 30 * time.Minute
	}
	return &Controller{cfg: cfg, log: log, rec: rec}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "ca-expiry" }

// Run looks at the CA every Config.Every until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Every)
	defer t.Stop()
	logged := false // once a term: the Event repeats it
	for {
		ca := c.cfg.CA()
		if msg, ok := Warning(ca, c.cfg.Now()); ok {
			if !logged {
				c.log.Warn("caexpiry: "+msg, "notAfter", ca.NotAfter)
				logged = true
			}
			c.rec.Eventf(&corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: metav1.NamespaceDefault, Name: rootca.ConfigMap},
				corev1.EventTypeWarning, Reason, "%s", msg)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Warning is the warning to give of ca at now, if it is within
// pki.CAWarning of its end or past it.
func Warning(ca *x509.Certificate, now time.Time) (string, bool) {
	left := ca.NotAfter.Sub(now)
	switch {
	case left <= 0:
		return fmt.Sprintf("the cluster CA %q expired on %s: no board trusts the servers any more; replace the CA",
			ca.Subject.CommonName, ca.NotAfter.UTC().Format(time.DateOnly)), true
	case left < pki.CAWarning:
		return fmt.Sprintf("the cluster CA %q expires on %s, in %s: replace it before then, or every certificate of the cluster lapses with it",
			ca.Subject.CommonName, ca.NotAfter.UTC().Format(time.DateOnly), duration.HumanDuration(left)), true
	}
	return "", false
}
