package printers

import (
	"time"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RuntimeClasses prints node.k8s.io/v1 RuntimeClasses: NAME HANDLER AGE.
var RuntimeClasses = &Printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn(),
		column("Handler", typeString, nodev1.RuntimeClass{}.SwaggerDoc()["handler"]),
		ageColumn(),
	},
	rows: typed(cells(func(rc *nodev1.RuntimeClass, now time.Time) []interface{} {
		return []interface{}{rc.Name, rc.Handler, since(rc.CreationTimestamp, now)}
	}), func(l *nodev1.RuntimeClassList) []nodev1.RuntimeClass { return l.Items }),
}
