package printers

import (
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// CertificateSigningRequests prints certificates.k8s.io/v1 CSRs as kubectl
// shows them: NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION.
var CertificateSigningRequests = &Printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn(), ageColumn(),
		column("SignerName", typeString, certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["signerName"]),
		column("Requestor", typeString, "Name of the user who submitted the request"),
		column("RequestedDuration", typeString, certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["expirationSeconds"]),
		column("Condition", typeString, certificatesv1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"]),
	},
	rows: typed(cells(func(c *certificatesv1.CertificateSigningRequest, now time.Time) []interface{} {
		requested := none
		if e := c.Spec.ExpirationSeconds; e != nil {
			requested = duration.HumanDuration(time.Duration(*e) * time.Second)
		}
		return []interface{}{c.Name, since(c.CreationTimestamp, now), c.Spec.SignerName, c.Spec.Username, requested, csrCondition(c)}
	}), func(l *certificatesv1.CertificateSigningRequestList) []certificatesv1.CertificateSigningRequest {
		return l.Items
	}),
}

// csrCondition is kubectl's CONDITION: the conditions' types, then Issued
// when a certificate is there; Pending when neither.
func csrCondition(c *certificatesv1.CertificateSigningRequest) string {
	var parts []string
	for _, cond := range c.Status.Conditions {
		parts = append(parts, string(cond.Type))
	}
	if len(c.Status.Certificate) > 0 {
		parts = append(parts, "Issued")
	}
	if len(parts) == 0 {
		return "Pending"
	}
	return strings.Join(parts, ",")
}
