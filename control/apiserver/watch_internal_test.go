package apiserver

import (
	"bytes"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/registry"
)

// TestEncodeEvent: a change's object is encoded once for all the watches
// that send it, and each gets what encoding the whole event gives.
func TestEncodeEvent(t *testing.T) {
	s := &Server{}
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "7", Labels: map[string]string{"a": "<b>"}}}
	for _, typ := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
		ev := registry.WatchEvent{Type: typ, Object: pod}
		got, err := s.encodeEvent(request{}, output{}, ev)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(s.watchEvent(request{}, output{}, ev)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s:\n got %s\nwant %s", typ, got, want.Bytes())
		}
	}
	if n := len(s.encoded.m); n != 1 {
		t.Errorf("one object sent three times encoded %d times", n)
	}
	other := pod.DeepCopy()
	if _, err := s.encodeEvent(request{}, output{}, registry.WatchEvent{Type: watch.Modified, Object: other}); err != nil {
		t.Fatal(err)
	}
	bookmark := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9"}}
	if _, err := s.encodeEvent(request{}, output{}, registry.WatchEvent{Type: watch.Bookmark, Object: bookmark}); err != nil {
		t.Fatal(err)
	}
	if n := len(s.encoded.m); n != 2 {
		t.Errorf("kept %d encoded objects, want 2 (a bookmark is not kept)", n)
	}
	for i := range encodedObjectsKept + 10 {
		p := pod.DeepCopy()
		p.Name = "q" + string(rune('a'+i%26))
		if _, err := s.encodeEvent(request{}, output{}, registry.WatchEvent{Type: watch.Added, Object: p}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.encoded.m); n != encodedObjectsKept {
		t.Errorf("kept %d encoded objects, want at most %d", n, encodedObjectsKept)
	}
}
