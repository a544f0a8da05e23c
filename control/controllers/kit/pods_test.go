package kit

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSlowStart(t *testing.T) {
	var calls atomic.Int32
	n, err := SlowStart(10, func() error { calls.Add(1); return nil })
	if n != 10 || err != nil || calls.Load() != 10 {
		t.Fatalf("all succeed: %d, %v, %d calls", n, err, calls.Load())
	}
	calls.Store(0)
	boom := errors.New("boom")
	var mu sync.Mutex
	n, err = SlowStart(10, func() error {
		mu.Lock()
		defer mu.Unlock()
		if calls.Add(1) == 5 { // in the third batch (calls 4–7)
			return boom
		}
		return nil
	})
	if n != 6 || !errors.Is(err, boom) || calls.Load() != 7 {
		t.Fatalf("failure in the third batch: %d created, err %v, %d calls; want 6, boom, 7", n, err, calls.Load())
	}
	if n, err := SlowStart(0, func() error { t.Fatal("called"); return nil }); n != 0 || err != nil {
		t.Fatalf("nothing to do: %d, %v", n, err)
	}
}

func template(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

func TestTemplateHash(t *testing.T) {
	a, b := template("busybox:1"), template("busybox:2")
	ha := TemplateHash(&a, nil)
	if ha != TemplateHash(a.DeepCopy(), nil) {
		t.Error("the hash is not stable")
	}
	if ha == TemplateHash(&b, nil) {
		t.Error("different templates, same hash")
	}
	one := int32(1)
	if ha == TemplateHash(&a, &one) {
		t.Error("the collision count does not change the hash")
	}
	if strings.ContainsAny(ha, "aeiou01") || ha == "" || len(ha) > 10 {
		t.Errorf("hash %q is not safe-encoded", ha)
	}
}
