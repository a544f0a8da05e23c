package printers

import (
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// specResources is the resource list of the API spec, written out here
// independently of the printers.
var specResources = []schema.GroupResource{
	{Group: "", Resource: "namespaces"},
	{Group: "", Resource: "nodes"},
	{Group: "", Resource: "pods"},
	{Group: "", Resource: "services"},
	{Group: "", Resource: "configmaps"},
	{Group: "", Resource: "secrets"},
	{Group: "", Resource: "serviceaccounts"},
	{Group: "", Resource: "events"},
	{Group: "", Resource: "persistentvolumes"},
	{Group: "", Resource: "persistentvolumeclaims"},
	{Group: "", Resource: "endpoints"},
	{Group: "apps", Resource: "deployments"},
	{Group: "apps", Resource: "replicasets"},
	{Group: "apps", Resource: "daemonsets"},
	{Group: "batch", Resource: "jobs"},
	{Group: "discovery.k8s.io", Resource: "endpointslices"},
	{Group: "networking.k8s.io", Resource: "ingresses"},
	{Group: "networking.k8s.io", Resource: "ingressclasses"},
	{Group: "autoscaling", Resource: "horizontalpodautoscalers"},
	{Group: "storage.k8s.io", Resource: "storageclasses"},
	{Group: "coordination.k8s.io", Resource: "leases"},
}

func TestColumnsCoverEveryResourceOfTheSpec(t *testing.T) {
	for _, gr := range specResources {
		t.Run(gr.String(), func(t *testing.T) {
			cols, ok := Columns(gr)
			if !ok {
				t.Fatalf("Columns(%v): not known", gr)
			}
			names := 0
			for _, c := range cols {
				if c.Name == "" || (c.Type != "string" && c.Type != "integer") {
					t.Errorf("bad column %+v", c)
				}
				if c.Description == "" {
					t.Errorf("column %q has no description", c.Name)
				}
				if c.Format == "name" {
					names++
					if c.Name != "Name" || c.Type != "string" {
						t.Errorf("name column is %+v", c)
					}
				}
			}
			if names != 1 {
				t.Errorf("%d columns of format name, want 1", names)
			}
		})
	}
}

func TestColumnsHeaders(t *testing.T) {
	// The headers kubectl prints (upper-cased names), and with -o wide.
	tests := []struct {
		resource      schema.GroupResource
		normal, extra []string
	}{
		{gr("", "pods"), []string{"Name", "Ready", "Status", "Restarts", "Age"}, []string{"IP", "Node", "Nominated Node", "Readiness Gates"}},
		{gr("", "services"), []string{"Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age"}, []string{"Selector"}},
		{gr("apps", "deployments"), []string{"Name", "Ready", "Up-to-date", "Available", "Age"}, []string{"Containers", "Images", "Selector"}},
		{gr("apps", "replicasets"), []string{"Name", "Desired", "Current", "Ready", "Age"}, []string{"Containers", "Images", "Selector"}},
		{gr("apps", "daemonsets"), []string{"Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age"}, []string{"Containers", "Images", "Selector"}},
		{gr("batch", "jobs"), []string{"Name", "Status", "Completions", "Duration", "Age"}, []string{"Containers", "Images", "Selector"}},
		{gr("", "nodes"), []string{"Name", "Status", "Roles", "Age", "Version"}, []string{"Internal-IP", "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime"}},
		{gr("", "persistentvolumes"), []string{"Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim", "StorageClass", "VolumeAttributesClass", "Reason", "Age"}, []string{"VolumeMode"}},
		{gr("", "persistentvolumeclaims"), []string{"Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass", "VolumeAttributesClass", "Age"}, []string{"VolumeMode"}},
		{gr("autoscaling", "horizontalpodautoscalers"), []string{"Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"}, nil},
		{gr("networking.k8s.io", "ingresses"), []string{"Name", "Class", "Hosts", "Address", "Ports", "Age"}, nil},
		{gr("networking.k8s.io", "ingressclasses"), []string{"Name", "Controller", "Parameters", "Age"}, nil},
		{gr("discovery.k8s.io", "endpointslices"), []string{"Name", "AddressType", "Ports", "Endpoints", "Age"}, nil},
		{gr("", "events"), []string{"Last Seen", "Type", "Reason", "Object", "Message"}, []string{"Subobject", "Source", "First Seen", "Count", "Name"}},
		{gr("coordination.k8s.io", "leases"), []string{"Name", "Holder", "Age"}, nil},
		{gr("", "namespaces"), []string{"Name", "Status", "Age"}, nil},
		{gr("", "configmaps"), []string{"Name", "Data", "Age"}, nil},
		{gr("", "secrets"), []string{"Name", "Type", "Data", "Age"}, nil},
		{gr("", "serviceaccounts"), []string{"Name", "Secrets", "Age"}, nil},
		{gr("", "endpoints"), []string{"Name", "Endpoints", "Age"}, nil},
		{gr("storage.k8s.io", "storageclasses"), []string{"Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age"}, nil},
		{gr("rbac.authorization.k8s.io", "roles"), []string{"Name", "Created At"}, nil},
		{gr("rbac.authorization.k8s.io", "clusterroles"), []string{"Name", "Created At"}, nil},
		{gr("rbac.authorization.k8s.io", "rolebindings"), []string{"Name", "Role", "Age"}, []string{"Users", "Groups", "ServiceAccounts"}},
		{gr("rbac.authorization.k8s.io", "clusterrolebindings"), []string{"Name", "Role", "Age"}, []string{"Users", "Groups", "ServiceAccounts"}},
	}
	for _, tt := range tests {
		t.Run(tt.resource.String(), func(t *testing.T) {
			cols, _ := Columns(tt.resource)
			var normal, extra []string
			for _, c := range cols {
				switch c.Priority {
				case 0:
					normal = append(normal, c.Name)
				case 1:
					extra = append(extra, c.Name)
				default:
					t.Errorf("column %q has priority %d", c.Name, c.Priority)
				}
			}
			if !reflect.DeepEqual(normal, tt.normal) {
				t.Errorf("kubectl get: %q, want %q", normal, tt.normal)
			}
			if !reflect.DeepEqual(extra, tt.extra) {
				t.Errorf("kubectl get -o wide adds %q, want %q", extra, tt.extra)
			}
		})
	}
}

func TestColumnsUnknownAndCopied(t *testing.T) {
	if _, ok := Columns(gr("flowcontrol.apiserver.k8s.io", "flowschemas")); ok {
		t.Error("Columns(flowschemas): ok, want not known")
	}
	if _, ok := Columns(gr("apps", "pods")); ok {
		t.Error("Columns(apps/pods): ok, want not known")
	}
	cols, _ := Columns(gr("", "pods"))
	cols[0].Name = "changed"
	again, _ := Columns(gr("", "pods"))
	if again[0].Name != "Name" {
		t.Errorf("changing a returned slice changed the table: %q", again[0].Name)
	}
}

func TestRowsOfListMatchRowsOfItems(t *testing.T) {
	for _, f := range fixtures() {
		t.Run(f.resource.String()+"/"+reflect.TypeOf(f.list).Elem().Name(), func(t *testing.T) {
			var want []metav1.TableRow
			for _, item := range f.items {
				rows, err := Rows(item, now)
				if err != nil {
					t.Fatalf("Rows(%T): %v", item, err)
				}
				want = append(want, rows...)
			}
			got, err := Rows(f.list, now)
			if err != nil {
				t.Fatalf("Rows(%T): %v", f.list, err)
			}
			if len(f.items) == 2 && reflect.DeepEqual(want[0].Cells, want[1].Cells) && f.resource.Resource != "namespaces" {
				t.Fatalf("fixture items print alike, the test would not see a reordering")
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("list rows\n %v\nitem rows\n %v", got, want)
			}
		})
	}
}

func TestCellsMatchColumns(t *testing.T) {
	for _, f := range fixtures() {
		cols, ok := Columns(f.resource)
		if !ok {
			t.Fatalf("Columns(%v): not known", f.resource)
		}
		for _, item := range f.items {
			row := rowOf(t, item)
			if len(row.Cells) != len(cols) {
				t.Errorf("%T: %d cells, %d columns", item, len(row.Cells), len(cols))
			}
			for i, c := range row.Cells {
				switch c.(type) {
				case string, int64, bool:
				default:
					t.Errorf("%T column %q: cell of type %T", item, cols[i].Name, c)
				}
			}
			if row.Object.Raw != nil || row.Object.Object != nil {
				t.Errorf("%T: row object set", item)
			}
		}
	}
}

func TestRowsEmptyList(t *testing.T) {
	rows, err := Rows(&corev1.PodList{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if rows == nil || len(rows) != 0 {
		t.Errorf("rows of an empty list: %#v, want an empty non-nil slice", rows)
	}
	// An empty list encodes as "rows": [], which kubectl expects.
	b, err := json.Marshal(metav1.Table{Rows: rows})
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]interface{}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if _, isList := raw["rows"].([]interface{}); !isList {
		t.Errorf("rows encode as %s", b)
	}
}

func TestRowsErrors(t *testing.T) {
	tests := []struct {
		name string
		obj  runtime.Object
		want error
	}{
		{"nil", nil, ErrNilObject},
		{"nil pod", (*corev1.Pod)(nil), ErrNilObject},
		{"nil pod list", (*corev1.PodList)(nil), ErrNilObject},
		{"nil v2 hpa", (*autoscalingv2.HorizontalPodAutoscaler)(nil), ErrNilObject},
		{"type without printer", &corev1.Binding{}, ErrUnknownType},
		{"list without printer", &corev1.ComponentStatusList{}, ErrUnknownType},
		{"status", &metav1.Status{}, ErrUnknownType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := Rows(tt.obj, now)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Rows: %v, want %v", err, tt.want)
			}
			if rows != nil {
				t.Errorf("rows %v with an error", rows)
			}
		})
	}
}

func TestRowsLeaveObjectsUnchanged(t *testing.T) {
	for _, f := range fixtures() {
		for _, item := range f.items {
			before := item.DeepCopyObject()
			rowOf(t, item)
			if !reflect.DeepEqual(before, item) {
				t.Errorf("%T changed by Rows", item)
			}
		}
	}
}

// TestRowsConcurrently prints shared objects from many goroutines; run with
// -race it catches writes to them (quantities cache their string form).
func TestRowsConcurrently(t *testing.T) {
	fs := fixtures()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, f := range fs {
				if _, err := Rows(f.list, now); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}

func TestAge(t *testing.T) {
	tests := []struct {
		name string
		t    metav1.Time
		want string
	}{
		{"zero", metav1.Time{}, "<unknown>"},
		{"seconds", ago(45e9), "45s"},
		{"just under two minutes", ago(119e9), "119s"},
		{"minutes and seconds", ago(5*60e9 + 30e9), "5m30s"},
		{"an hour", ago(3600e9), "60m"},
		{"hours and minutes", ago(3*3600e9 + 20*60e9), "3h20m"},
		{"a day and a half", ago(36 * 3600e9), "36h"},
		{"days and hours", ago(3*24*3600e9 + 5*3600e9), "3d5h"},
		{"clock skew tolerated", ago(-1e9), "0s"},
		{"future", ago(-10e9), "<invalid>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := since(tt.t, now); got != tt.want {
				t.Errorf("since: %q, want %q", got, tt.want)
			}
		})
	}
}

func TestResourceQuotaRow(t *testing.T) {
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "compute", CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Second))},
		Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{"pods": resource.MustParse("10"), "requests.cpu": resource.MustParse("2"), "limits.memory": resource.MustParse("2Gi")},
			Used: corev1.ResourceList{"pods": resource.MustParse("3"), "requests.cpu": resource.MustParse("500m")},
		}}
	got := printResourceQuota(q, now)
	want := []interface{}{"compute", "pods: 3/10, requests.cpu: 500m/2", "limits.memory: 0/2Gi", "90s"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
