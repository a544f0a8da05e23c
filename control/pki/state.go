package pki

import (
	"crypto/x509"
	"time"

	"github.com/isle-cluster/isle/control/wire"
)

// CAWarning is how long before the CA expires isle warns of it: an Event
// on the cluster, and `isle certs check`.
const CAWarning = 365 * 24 * time.Hour

// A certificate's state, as `isle certs check` shows it.
const (
	StateOK          = "OK"
	StateRenewSoon   = "RENEW-SOON"    // a leaf due for renewal, a CA within CAWarning of its end
	StateExpired     = "EXPIRED"       // past NotAfter
	StateNotYetValid = "NOT-YET-VALID" // before NotBefore: a clock far behind
)

// State is cert's state at now. A leaf is RENEW-SOON once its renewal is
// due (wire.RenewalDue): its holder renews it within the hour, so a leaf
// that stays so is one that is not renewed.
func State(cert *x509.Certificate, now time.Time) string {
	switch {
	case now.Before(cert.NotBefore):
		return StateNotYetValid
	case !now.Before(cert.NotAfter):
		return StateExpired
	case cert.IsCA && cert.NotAfter.Sub(now) < CAWarning:
		return StateRenewSoon
	case !cert.IsCA && wire.RenewalDue(cert, now):
		return StateRenewSoon
	}
	return StateOK
}
