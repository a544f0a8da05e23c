package pods

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/node/containers"
)

// Image garbage collection, as the kubelet's defaults: when the image
// filesystem is more than 85% full, unused images go until it is 80%.
const (
	imageGCHigh     = 0.85
	imageGCLow      = 0.80
	imageGCInterval = 5 * time.Minute
)

// ImageCollector is the part of the runtime image garbage collection
// uses (containers.Runtime).
type ImageCollector interface {
	ImageFS(ctx context.Context) (string, error)
	CollectImages(ctx context.Context, inUse map[string]bool, usage func() (float64, error), high, low float64) ([]string, error)
}

// collectImages removes unused images when the disk fills, every
// imageGCInterval; the images of the board's pods are in use even when
// none of their containers exists (a pod waiting to restart).
func (m *Manager) collectImages(ctx context.Context, gc ImageCollector) {
	t := time.NewTicker(imageGCInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := m.collectOnce(ctx, gc); err != nil && ctx.Err() == nil {
			m.log.Warn("pods: image garbage collection", "err", err)
		}
	}
}

func (m *Manager) collectOnce(ctx context.Context, gc ImageCollector) error {
	root, err := gc.ImageFS(ctx)
	if err != nil {
		return err
	}
	inUse := map[string]bool{}
	for _, obj := range m.pods.List() {
		p := obj.(*corev1.Pod)
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			if ref, err := containers.NormalizeImage(c.Image); err == nil {
				inUse[ref] = true
			}
		}
	}
	removed, err := gc.CollectImages(ctx, inUse, func() (float64, error) { return containers.DiskUsage(root) }, imageGCHigh, imageGCLow)
	if len(removed) > 0 {
		m.log.Info("pods: images removed to free disk", "images", removed)
	}
	return err
}
