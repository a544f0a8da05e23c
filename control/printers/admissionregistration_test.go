package printers

import (
	"reflect"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestWebhookConfigurations(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "policy", CreationTimestamp: metav1.NewTime(now.Add(-3 * time.Hour))}
	v := admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: meta, Webhooks: make([]admissionregistrationv1.ValidatingWebhook, 2)}
	m := admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: meta, Webhooks: make([]admissionregistrationv1.MutatingWebhook, 3)}
	empty := admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "none"}}
	for _, tt := range []struct {
		name    string
		printer *Printer
		list    runtime.Object
		want    [][]interface{}
	}{
		{"validating", ValidatingWebhookConfigurations,
			&admissionregistrationv1.ValidatingWebhookConfigurationList{Items: []admissionregistrationv1.ValidatingWebhookConfiguration{v, v}},
			[][]interface{}{{"policy", int64(2), "3h"}, {"policy", int64(2), "3h"}}},
		{"mutating", MutatingWebhookConfigurations,
			&admissionregistrationv1.MutatingWebhookConfigurationList{Items: []admissionregistrationv1.MutatingWebhookConfiguration{m, empty}},
			[][]interface{}{{"policy", int64(3), "3h"}, {"none", int64(0), "<unknown>"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cols := tt.printer.Columns()
			var names, types []string
			for _, c := range cols {
				names = append(names, c.Name)
				types = append(types, c.Type)
			}
			if want := []string{"Name", "Webhooks", "Age"}; !reflect.DeepEqual(names, want) {
				t.Errorf("columns %q, want %q", names, want)
			}
			if want := []string{"string", "integer", "string"}; !reflect.DeepEqual(types, want) {
				t.Errorf("column types %q, want %q", types, want)
			}
			if cols[1].Description == "" {
				t.Errorf("Webhooks column without description")
			}
			rows, err := tt.printer.Rows(tt.list, now)
			if err != nil || len(rows) != len(tt.want) {
				t.Fatalf("rows of a list of %d: %d, %v", len(tt.want), len(rows), err)
			}
			for i, r := range rows {
				if !reflect.DeepEqual(r.Cells, tt.want[i]) {
					t.Errorf("row %d cells %#v, want %#v", i, r.Cells, tt.want[i])
				}
			}
		})
	}
	// A single object prints as its list's item.
	rows, err := ValidatingWebhookConfigurations.Rows(&v, now)
	if err != nil || len(rows) != 1 || !reflect.DeepEqual(rows[0].Cells, []interface{}{"policy", int64(2), "3h"}) {
		t.Errorf("rows of one configuration: %#v, %v", rows, err)
	}
}
