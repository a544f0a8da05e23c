package nodelifecycle

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFreeBlock(t *testing.T) {
	p := netip.MustParsePrefix
	cases := []struct {
		name string
		r    netip.Prefix
		bits int
		used []string
		want string // "" for none
	}{
		{"first", p("10.42.0.0/16"), 24, nil, "10.42.0.0/24"},
		{"skips used", p("10.42.0.0/16"), 24, []string{"10.42.0.0/24", "10.42.1.0/24"}, "10.42.2.0/24"},
		{"crosses a byte", p("10.42.0.0/16"), 26, []string{"10.42.0.0/26", "10.42.0.64/26", "10.42.0.128/26", "10.42.0.192/26"}, "10.42.1.0/26"},
		{"full", p("10.42.0.0/23"), 24, []string{"10.42.0.0/24", "10.42.1.0/24"}, ""},
		{"unmasked range", p("10.42.7.9/16"), 24, nil, "10.42.0.0/24"},
		{"ipv6", p("fd00:42::/56"), 64, []string{"fd00:42::/64"}, "fd00:42:0:1::/64"},
		{"block wider than range", p("10.42.0.0/16"), 8, nil, ""},
	}
	for _, tc := range cases {
		used := map[netip.Prefix]bool{}
		for _, u := range tc.used {
			used[p(u)] = true
		}
		got, ok := freeBlock(tc.r, tc.bits, used)
		if tc.want == "" {
			if ok {
				t.Errorf("%s: got %v, want none", tc.name, got)
			}
			continue
		}
		if !ok || got != p(tc.want) {
			t.Errorf("%s: got %v %v, want %s", tc.name, got, ok, tc.want)
		}
	}
}

func TestEvictionTime(t *testing.T) {
	added := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	unreachable := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: added}}
	custom := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: added}}
	secs := func(s int64) *int64 { return &s }
	tol := func(key string, s *int64) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: s}
	}
	cases := []struct {
		name   string
		tols   []corev1.Toleration
		taints []corev1.Taint
		evict  bool
		after  time.Duration
	}{
		{"untolerated: now", nil, []corev1.Taint{unreachable}, true, 0},
		{"tolerated 30 s", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, secs(30))}, []corev1.Taint{unreachable}, true, 30 * time.Second},
		{"the longest toleration counts", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, secs(30)), tol(corev1.TaintNodeUnreachable, secs(90))}, []corev1.Taint{unreachable}, true, 90 * time.Second},
		{"forever", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, nil)}, []corev1.Taint{unreachable}, false, 0},
		{"negative seconds: now", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, secs(-5))}, []corev1.Taint{unreachable}, true, 0},
		{"one taint untolerated", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, nil)}, []corev1.Taint{unreachable, custom}, true, 0},
		{"the earliest taint decides", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, secs(60)), tol("dedicated", secs(10))}, []corev1.Taint{unreachable, custom}, true, 10 * time.Second},
		{"counted from a later hold", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, secs(30))}, []corev1.Taint{unreachable}, true, 5*time.Minute + 30*time.Second},
		{"untolerated: at the hold's end", nil, []corev1.Taint{unreachable}, true, 5 * time.Minute},
		{"an earlier hold changes nothing", []corev1.Toleration{tol(corev1.TaintNodeUnreachable, secs(30))}, []corev1.Taint{unreachable}, true, 30 * time.Second},
	}
	for _, tc := range cases {
		from := time.Time{}
		switch {
		case strings.Contains(tc.name, "later hold"), strings.Contains(tc.name, "hold's end"):
			from = added.Add(5 * time.Minute)
		case strings.Contains(tc.name, "earlier hold"):
			from = added.Add(-time.Hour)
		}
		at, evict := evictionTime(tc.tols, tc.taints, from)
		if evict != tc.evict || evict && !at.Equal(added.Add(tc.after)) {
			t.Errorf("%s: evict %v at %v, want %v after %v", tc.name, evict, at, tc.evict, tc.after)
		}
	}
}

func TestDisruptionOf(t *testing.T) {
	cases := []struct {
		notReady, total int
		want            disruption
	}{
		{0, 0, disruptionNone},
		{0, 5, disruptionNone},
		{1, 1, disruptionFull},
		{5, 5, disruptionFull},
		{1, 2, disruptionNone}, // one lost board of two: an ordinary failure
		{2, 3, disruptionNone}, // two are not more than two
		{2, 5, disruptionNone}, // the two agents of make demo's island
		{3, 5, disruptionPartial},
		{3, 6, disruptionNone}, // 50% < 55%
		{138, 250, disruptionPartial},
		{137, 250, disruptionNone},
	}
	for _, tc := range cases {
		if got := disruptionOf(tc.notReady, tc.total); got != tc.want {
			t.Errorf("%d of %d not ready: %q, want %q", tc.notReady, tc.total, got, tc.want)
		}
	}
}
