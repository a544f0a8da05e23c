package agent

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/isle-cluster/isle/node/containers"
)

func TestStatusImages(t *testing.T) {
	const nginxID = "docker.io/library/nginx@sha256:aaaa"
	imgs := []containers.ImageInfo{
		{Ref: "docker.io/library/nginx:1.27", ID: nginxID, Size: 70 << 20},
		{Ref: "docker.io/library/nginx:latest", ID: nginxID, Size: 70 << 20},
		{Ref: "registry.local/app:1", ID: "registry.local/app@sha256:bbbb", Size: 5 << 20},
		{Ref: "docker.io/library/postgres:16", ID: "docker.io/library/postgres@sha256:cccc", Size: 150 << 20},
	}
	got := statusImages(imgs)
	want := []corev1.ContainerImage{
		{Names: []string{"docker.io/library/postgres@sha256:cccc", "docker.io/library/postgres:16"}, SizeBytes: 150 << 20},
		{Names: []string{nginxID, "docker.io/library/nginx:1.27", "docker.io/library/nginx:latest"}, SizeBytes: 70 << 20},
		{Names: []string{"registry.local/app@sha256:bbbb", "registry.local/app:1"}, SizeBytes: 5 << 20},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}

	// At most maxStatusImages, the largest.
	imgs = nil
	for i := range maxStatusImages + 10 {
		imgs = append(imgs, containers.ImageInfo{Ref: fmt.Sprintf("r/i%d:1", i), ID: fmt.Sprintf("r/i%d@sha256:%d", i, i), Size: int64(i)})
	}
	got = statusImages(imgs)
	if len(got) != maxStatusImages || got[0].SizeBytes != maxStatusImages+9 || got[len(got)-1].SizeBytes != 10 {
		t.Errorf("%d images from %d to %d bytes, want %d from %d to 10", len(got), got[0].SizeBytes, got[len(got)-1].SizeBytes,
			maxStatusImages, maxStatusImages+9)
	}
}

func TestApplyStatusImages(t *testing.T) {
	images := []corev1.ContainerImage{{Names: []string{"r/a@sha256:1", "r/a:1"}, SizeBytes: 10}}
	n := &corev1.Node{}
	if !applyStatus(n, corev1.NodeStatus{Images: slices.Clone(images)}) || len(n.Status.Images) != 1 {
		t.Fatalf("images not applied: %v", n.Status.Images)
	}
	if applyStatus(n, corev1.NodeStatus{Images: slices.Clone(images)}) {
		t.Error("the same images count as a change")
	}
	// A report without a runtime (nil) leaves them alone.
	if applyStatus(n, corev1.NodeStatus{}) || len(n.Status.Images) != 1 {
		t.Error("no reading of images replaced them")
	}
}

func TestApplyStatusKeepsOthersResources(t *testing.T) {
	n := &corev1.Node{Status: corev1.NodeStatus{
		Capacity:    corev1.ResourceList{"cpu": resource.MustParse("4"), "example.com/fakecpu": resource.MustParse("1k")},
		Allocatable: corev1.ResourceList{"cpu": resource.MustParse("4"), "example.com/fakecpu": resource.MustParse("1k")},
	}}
	want := corev1.NodeStatus{Capacity: corev1.ResourceList{"cpu": resource.MustParse("2")}, Allocatable: corev1.ResourceList{"cpu": resource.MustParse("2")}}
	if !applyStatus(n, want) {
		t.Fatal("the agent's cpu was not applied")
	}
	for _, l := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		if l.Cpu().String() != "2" || l.Name("example.com/fakecpu", resource.DecimalSI).String() != "1k" {
			t.Errorf("resources %v, want the agent's cpu and the patched example.com/fakecpu", l)
		}
	}
	if applyStatus(n, want) {
		t.Error("an extended resource someone else advertises counts as a change every time")
	}
}
