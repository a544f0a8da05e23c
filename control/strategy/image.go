package strategy

import (
	"regexp"

	corev1 "k8s.io/api/core/v1"
)

// The grammar of container image references (distribution/reference), as
// far as Kubernetes' pull policy defaulting needs it.
var (
	refDomainComponent = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	refDomainName      = refDomainComponent + `(?:\.` + refDomainComponent + `)*`
	refIPv6            = `\[(?:[a-fA-F0-9:]+)\]`
	refDomain          = `(?:` + refDomainName + `|` + refIPv6 + `)(?::[0-9]+)?`
	refPathComponent   = `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
	refName            = `(?:` + refDomain + `/)?` + refPathComponent + `(?:/` + refPathComponent + `)*`
	refTag             = `[\w][\w.-]{0,127}`
	refDigest          = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
	referenceRegexp    = regexp.MustCompile(`^(` + refName + `)(?::(` + refTag + `))?(?:@(` + refDigest + `))?$`)
	anchoredIDRegexp   = regexp.MustCompile(`^[a-f0-9]{64}$`)
)

// imageTag returns the tag Kubernetes sees in an image reference: the given
// tag, "latest" when there is neither tag nor digest, and "" for a digest
// without tag or a reference that does not parse.
func imageTag(image string) string {
	if anchoredIDRegexp.MatchString(image) {
		return ""
	}
	m := referenceRegexp.FindStringSubmatch(image)
	if m == nil || len(m[1]) > 255 {
		return ""
	}
	tag, digest := m[2], m[3]
	if tag == "" && digest == "" {
		return "latest"
	}
	return tag
}

// pullPolicyFor is the default pull policy of an image.
func pullPolicyFor(image string) corev1.PullPolicy {
	if imageTag(image) == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}
