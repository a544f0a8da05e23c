package printers

import (
	"reflect"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRuntimeClasses(t *testing.T) {
	rc := nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor", CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Second))}, Handler: "runsc"}
	var names []string
	for _, c := range RuntimeClasses.Columns() {
		names = append(names, c.Name)
	}
	if want := []string{"Name", "Handler", "Age"}; !reflect.DeepEqual(names, want) {
		t.Errorf("columns %q, want %q", names, want)
	}
	rows, err := RuntimeClasses.Rows(&nodev1.RuntimeClassList{Items: []nodev1.RuntimeClass{rc, rc}}, now)
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows of a list of 2: %d, %v", len(rows), err)
	}
	if want := []interface{}{"gvisor", "runsc", "90s"}; !reflect.DeepEqual(rows[0].Cells, want) {
		t.Errorf("cells %#v, want %#v", rows[0].Cells, want)
	}
}
