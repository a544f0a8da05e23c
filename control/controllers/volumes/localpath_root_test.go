package volumes

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeLocalPathRoot: a node's announced directory is used when it is a
// clean absolute path; anything else falls back to the default.
func TestNodeLocalPathRoot(t *testing.T) {
	for ann, want := range map[string]string{
		"":                           "/var/lib/isle/storage",
		"/srv/isle/pi2/data/storage": "/srv/isle/pi2/data/storage",
		"relative/storage":           "/var/lib/isle/storage",
		"/srv/../etc":                "/var/lib/isle/storage",
		"/":                          "/var/lib/isle/storage",
		"/var/lib/isle/storage/":     "/var/lib/isle/storage",
	} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pi2", Annotations: map[string]string{"isle.dev/local-path-root": ann}}}
		if got := nodeLocalPathRoot(n); got != want {
			t.Errorf("annotation %q: root %q, want %q", ann, got, want)
		}
	}
}
