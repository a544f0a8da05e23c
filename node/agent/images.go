package agent

import (
	"cmp"
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/isle-cluster/isle/node/containers"
)

// maxStatusImages is how many images the Node's status lists, the largest
// first, as the kubelet's default nodeStatusMaxImages: the scheduler's
// image locality score reads them.
const maxStatusImages = 50

// statusImages turns the runtime's images into status.images: one entry
// per image, named by its repository digest and its tags.
func statusImages(imgs []containers.ImageInfo) []corev1.ContainerImage {
	byID := map[string]*corev1.ContainerImage{}
	var out []*corev1.ContainerImage
	for _, img := range imgs {
		ci, ok := byID[img.ID]
		if !ok {
			ci = &corev1.ContainerImage{Names: []string{img.ID}, SizeBytes: img.Size}
			byID[img.ID] = ci
			out = append(out, ci)
		}
		if img.Ref != img.ID && !slices.Contains(ci.Names, img.Ref) {
			ci.Names = append(ci.Names, img.Ref)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.ContainerImage) int {
		return cmp.Or(cmp.Compare(b.SizeBytes, a.SizeBytes), cmp.Compare(a.Names[0], b.Names[0]))
	})
	images := make([]corev1.ContainerImage, 0, min(len(out), maxStatusImages))
	for _, ci := range out[:min(len(out), maxStatusImages)] {
		slices.Sort(ci.Names[1:])
		images = append(images, *ci)
	}
	return images
}

// imagesInterval is how often the agent reads its images: the scheduler's
// image locality score does not need them sooner, and each reading walks
// containerd's content store.
const imagesInterval = time.Minute

// refreshImages reads the board's images into the report, at most once
// every imagesInterval; it reports whether they differ from those last
// posted. Without a runtime there are none.
func (a *Agent) refreshImages(ctx context.Context) (bool, error) {
	if a.listImages == nil || time.Since(a.imagesRead) < imagesInterval {
		return false, nil
	}
	a.imagesRead = time.Now()
	imgs, err := a.listImages(ctx)
	if err != nil {
		return false, err
	}
	images := statusImages(imgs)
	r := a.report
	r.mu.Lock()
	defer r.mu.Unlock()
	r.images = images
	return !equality.Semantic.DeepEqual(images, r.postedImages), nil
}
