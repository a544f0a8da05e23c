package caexpiry_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/controllers"
	"github.com/isle-cluster/isle/control/controllers/caexpiry"
	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/pki"
)

func TestWarning(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("isle-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	day := 24 * time.Hour
	tests := []struct {
		name string
		at   time.Time
		want string // "": no warning
	}{
		{"new", now, ""},
		{"a year and a day left", ca.Cert().NotAfter.Add(-366 * day), ""},
		{"364 days left", ca.Cert().NotAfter.Add(-364 * day), "expires on " + ca.Cert().NotAfter.UTC().Format(time.DateOnly) + ", in 364d"},
		{"expired", ca.Cert().NotAfter.Add(time.Minute), "expired on"},
	}
	for _, tc := range tests {
		msg, ok := caexpiry.Warning(ca.Cert(), tc.at)
		if ok != (tc.want != "") || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %q, %v; want %q", tc.name, msg, ok, tc.want)
		}
	}
}

// TestEvent runs the table with a CA whose year has begun: the leader
// records the Warning Event, and records it again while it lasts.
func TestEvent(t *testing.T) {
	clock := kit.NewTestClock(time.Now())
	ca, err := pki.NewCA("isle-ca", clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(ca.Cert().NotAfter.Sub(clock.Now()) - 200*24*time.Hour)
	e := tabletest.New(t, controllers.WithCAExpiry(caexpiry.Config{CA: ca.Cert, Now: clock.Now, Every: 10 * time.Millisecond}))
	e.Namespace(t, "default") // as every cluster has it
	evs := e.Res(t, "", "v1", "events")
	var got corev1.Event
	tabletest.Eventually(t, "a Warning Event counted twice", func() bool {
		list, err := e.List(e.Ctx, evs, "default", metav1.ListOptions{FieldSelector: "reason=" + caexpiry.Reason})
		if err != nil || len(list.(*corev1.EventList).Items) != 1 {
			return false
		}
		got = list.(*corev1.EventList).Items[0]
		return got.Count >= 2
	})
	if got.Type != corev1.EventTypeWarning || got.InvolvedObject.Kind != "ConfigMap" || got.InvolvedObject.Name != "kube-root-ca.crt" ||
		got.Source.Component != "isle-certificates" || !strings.Contains(got.Message, "in 200d") {
		t.Fatalf("event %s %s/%s from %s: %q", got.Type, got.InvolvedObject.Kind, got.InvolvedObject.Name, got.Source.Component, got.Message)
	}
}
