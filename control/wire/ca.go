package wire

import (
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// CAPath is where a board asks the servers which CAs to trust: GET,
// authenticated by the node credential (Authorization: Bearer), the
// answer a CAInfo. Boards ask every CAPollEvery, so that they follow a
// replacement of the cluster CA (`isle certs rotate-ca`).
const CAPath = "/isle/v1/ca"

// CAPollEvery is how often a board asks CAPath.
const CAPollEvery = 15 * time.Second

// CAInfo is CAPath's answer.
type CAInfo struct {
	// Bundle is the CA certificates to trust (PEM), the signing one first:
	// while the CA is replaced, both the old and the new.
	Bundle []byte `json:"bundle"`
	// Signer is the CAHash of the CA that signs certificates now: a board
	// whose streaming certificate another CA signed asks for a new one.
	Signer string `json:"signer"`
}

// Node annotations by which a board reports where it stands in a
// replacement of the CA, and which the leader waits for before each step.
const (
	// AnnotationCATrust: the CAHash of each CA the board trusts, comma
	// separated.
	AnnotationCATrust = "isle.dev/ca-trust"
	// AnnotationCAIssuer: the CAHash of the CA of the board's streaming
	// certificate.
	AnnotationCAIssuer = "isle.dev/ca-issuer"
)

// The phases of a replacement of the CA, in order.
const (
	// CAPhaseTrustBoth: every server and board trusts the old and the new
	// CA; the old one still signs.
	CAPhaseTrustBoth = "trust-both"
	// CAPhaseIssueNew: the new CA signs, and every certificate is issued
	// anew from it; both are still trusted.
	CAPhaseIssueNew = "issue-new"
	// CAPhaseDropOld: the new CA alone is trusted; the servers' tokens
	// carry its hash.
	CAPhaseDropOld = "drop-old"
	// CAPhaseDone: every server and board has dropped the old CA.
	CAPhaseDone = "done"
)

// CARotation is a replacement of the cluster CA as the servers record it.
type CARotation struct {
	Phase string `json:"phase"`
	// Old and New are the CAs' certificates (PEM); NewKeySealed is the
	// new CA's key sealed with the token's secret, as servers keep the
	// CA's key.
	Old          []byte    `json:"old"`
	New          []byte    `json:"new"`
	NewKeySealed []byte    `json:"newKeySealed"`
	Started      time.Time `json:"started"`
	// Waiting are the boards and servers the current phase waits for,
	// with what each lacks; empty once done.
	Waiting []string `json:"waiting,omitempty"`
}

// CARotationStatus is the answer of a server's store API to `isle certs
// rotate-ca` (see package cluster).
type CARotationStatus struct {
	CARotation
	// Token is the cluster token with the new CA's hash, once done.
	Token string `json:"token,omitempty"`
}

// ParseCertsPEM parses every certificate of a PEM bundle; it has at
// least one.
func ParseCertsPEM(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := data; len(strings.TrimSpace(string(rest))) > 0; {
		c, r, err := parseOneCert(rest)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(out)+1, err)
		}
		out, rest = append(out, c), r
	}
	if len(out) == 0 {
		return nil, errors.New("certificate: no PEM block found")
	}
	return out, nil
}

// CAHashes are the CAHash of each of certs, in order.
func CAHashes(certs []*x509.Certificate) []string {
	var out []string
	for _, c := range certs {
		out = append(out, CAHash(c))
	}
	return out
}

// TrustsCA reports whether a board's AnnotationCATrust value names hash.
func TrustsCA(annotation, hash string) bool {
	return slices.Contains(strings.Split(annotation, ","), hash)
}
