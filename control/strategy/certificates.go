package strategy

import (
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CertificateSigningRequest is certificates.k8s.io/v1's strategy, with
// kube-apiserver's validation (pkg/apis/certificates/validation): the
// request is a PEM CERTIFICATE REQUEST with a valid signature; the signer
// is a qualified name with a path; usages are known and not repeated; a
// requested duration is ten minutes at least; the spec never changes. A
// status write (the signer's) and an approval write (kubectl certificate
// approve|deny) keep the spec; an approval keeps the certificate; Approved
// and Denied exclude each other, and neither, nor Failed, is ever removed.
var CertificateSigningRequest = &Kind[*certificatesv1.CertificateSigningRequest]{
	create: func(c *certificatesv1.CertificateSigningRequest) field.ErrorList {
		return append(validateMeta(&c.ObjectMeta, false, apivalidation.NameIsDNSSubdomain), validateCSRSpec(&c.Spec)...)
	},
	update: func(c, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
		errs := validateMetaUpdate(&c.ObjectMeta, &old.ObjectMeta)
		if !apiequality.Semantic.DeepEqual(c.Spec, old.Spec) {
			errs = append(errs, field.Invalid(field.NewPath("spec"), "", "field is immutable"))
		}
		return errs
	},
	status: validateCSRStatus,
}

// CSRFields are the field selectors of CertificateSigningRequests
// (spec.signerName, as upstream's).
var CSRFields = fields(map[string]func(*certificatesv1.CertificateSigningRequest) string{
	"spec.signerName": func(c *certificatesv1.CertificateSigningRequest) string { return c.Spec.SignerName },
})

// PrepareForApprovalUpdate keeps what an approval write may not change:
// everything but the conditions.
func PrepareForApprovalUpdate(obj, old runtime.Object) {
	c, prev := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	c.Spec = prev.Spec
	c.Status.Certificate = prev.Status.Certificate
}

var csrUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageSigning, certificatesv1.UsageDigitalSignature, certificatesv1.UsageContentCommitment,
	certificatesv1.UsageKeyEncipherment, certificatesv1.UsageKeyAgreement, certificatesv1.UsageDataEncipherment,
	certificatesv1.UsageCertSign, certificatesv1.UsageCRLSign, certificatesv1.UsageEncipherOnly, certificatesv1.UsageDecipherOnly,
	certificatesv1.UsageAny, certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth, certificatesv1.UsageCodeSigning,
	certificatesv1.UsageEmailProtection, certificatesv1.UsageSMIME, certificatesv1.UsageIPsecEndSystem, certificatesv1.UsageIPsecTunnel,
	certificatesv1.UsageIPsecUser, certificatesv1.UsageTimestamping, certificatesv1.UsageOCSPSigning, certificatesv1.UsageMicrosoftSGC,
	certificatesv1.UsageNetscapeSGC,
}

func validateCSRSpec(s *certificatesv1.CertificateSigningRequestSpec) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if len(s.Request) == 0 {
		errs = append(errs, field.Required(spec.Child("request"), ""))
	} else if block, rest := pem.Decode(s.Request); block == nil || block.Type != "CERTIFICATE REQUEST" || len(strings.TrimSpace(string(rest))) > 0 {
		errs = append(errs, field.Invalid(spec.Child("request"), "", "PEM block type must be CERTIFICATE REQUEST"))
	} else if csr, err := x509.ParseCertificateRequest(block.Bytes); err != nil {
		errs = append(errs, field.Invalid(spec.Child("request"), "", err.Error()))
	} else if err := csr.CheckSignature(); err != nil {
		errs = append(errs, field.Invalid(spec.Child("request"), "", "invalid signature: "+err.Error()))
	}
	errs = append(errs, validateSignerName(spec.Child("signerName"), s.SignerName)...)
	if len(s.Usages) == 0 {
		errs = append(errs, field.Required(spec.Child("usages"), ""))
	}
	for i, u := range s.Usages {
		if !slices.Contains(csrUsages, u) {
			errs = append(errs, field.NotSupported(spec.Child("usages").Index(i), u, usageNames()))
		} else if slices.Contains(s.Usages[:i], u) {
			errs = append(errs, field.Duplicate(spec.Child("usages").Index(i), u))
		}
	}
	if e := s.ExpirationSeconds; e != nil && *e < 600 {
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *e, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	return errs
}

func usageNames() []string {
	out := make([]string, len(csrUsages))
	for i, u := range csrUsages {
		out[i] = string(u)
	}
	return out
}

// validateSignerName is upstream's: a qualified domain, a slash, a path.
func validateSignerName(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	domain, path, ok := strings.Cut(name, "/")
	if !ok || path == "" || strings.Count(name, "/") > 1 {
		return field.ErrorList{field.Invalid(p, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(domain) {
		errs = append(errs, field.Invalid(p, name, "validating domain component: "+msg))
	}
	if !strings.Contains(domain, ".") {
		errs = append(errs, field.Invalid(p, name, "should be a domain with at least two segments separated by dots"))
	}
	if len(name) > 571 {
		errs = append(errs, field.TooLong(p, "", 571))
	}
	return errs
}

func validateCSRStatus(c, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	var errs field.ErrorList
	conds := field.NewPath("status", "conditions")
	seen := map[certificatesv1.RequestConditionType]bool{}
	for i, cond := range c.Status.Conditions {
		p := conds.Index(i)
		if cond.Type == "" {
			errs = append(errs, field.Required(p.Child("type"), ""))
		}
		switch cond.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			if seen[cond.Type] {
				errs = append(errs, field.Duplicate(p.Child("type"), cond.Type))
			}
			if cond.Status != corev1.ConditionTrue {
				errs = append(errs, field.NotSupported(p.Child("status"), cond.Status, []string{string(corev1.ConditionTrue)}))
			}
		default:
			if !slices.Contains([]corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}, cond.Status) {
				errs = append(errs, field.NotSupported(p.Child("status"), cond.Status, []string{"True", "False", "Unknown"}))
			}
		}
		seen[cond.Type] = true
	}
	if seen[certificatesv1.CertificateApproved] && seen[certificatesv1.CertificateDenied] {
		errs = append(errs, field.Invalid(conds, c.Status.Conditions, "Approved and Denied conditions are mutually exclusive"))
	}
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		had := slices.ContainsFunc(old.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool { return c.Type == t })
		if had && !seen[t] {
			errs = append(errs, field.Forbidden(conds, "updates may not remove a condition of type "+string(t)))
		}
	}
	if cert := c.Status.Certificate; len(cert) > 0 {
		if len(old.Status.Certificate) > 0 && string(cert) != string(old.Status.Certificate) {
			errs = append(errs, field.Invalid(field.NewPath("status", "certificate"), "", "updates may not modify existing certificate content"))
		}
		rest := cert
		n := 0
		for {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			if _, err := x509.ParseCertificate(block.Bytes); block.Type != "CERTIFICATE" || err != nil {
				errs = append(errs, field.Invalid(field.NewPath("status", "certificate"), "", "must contain only PEM CERTIFICATE blocks"))
				break
			}
			n++
		}
		if n == 0 || len(strings.TrimSpace(string(rest))) > 0 {
			errs = append(errs, field.Invalid(field.NewPath("status", "certificate"), "", "must contain at least one CERTIFICATE PEM block"))
		}
	}
	return errs
}
