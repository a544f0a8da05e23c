package pods

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/isle-cluster/isle/control/wire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// The local-path volumes' contract with the control plane (see
// control/controllers/volumes/localpath.go): a deleted volume of this node with
// the cleanup finalizer has its directory removed here, then the
// finalizer.
const localPathFinalizer = "isle.dev/local-path-cleanup"

// LocalPathRoot is the directory of the local-path volumes of a board
// with the data directory dataDir; the agent announces it on its Node.
func LocalPathRoot(dataDir string) string { return filepath.Join(dataDir, "storage") }

// cleanLocalPaths watches the volumes and cleans up this node's deleted
// local-path volumes.
func (m *Manager) cleanLocalPaths(ctx context.Context) {
	// The volumes labelled with this node's name: the only ones a node
	// may list.
	lw := cache.NewFilteredListWatchFromClient(m.cfg.Client, "persistentvolumes", "", func(o *metav1.ListOptions) {
		o.LabelSelector = labels.SelectorFromSet(labels.Set{wire.LabelLocalPathNode: m.cfg.NodeName}).String()
	})
	// Resynced every minute: a cleanup that failed is tried again then.
	inf := cache.NewSharedIndexInformer(lw, &corev1.PersistentVolume{}, time.Minute, cache.Indexers{})
	clean := func(obj any) {
		pv, ok := obj.(*corev1.PersistentVolume)
		if !ok || pv.DeletionTimestamp == nil || !slices.Contains(pv.Finalizers, localPathFinalizer) || !wire.VolumeOnlyOn(pv, m.cfg.NodeName) {
			return
		}
		if err := m.cleanLocalPath(ctx, pv); err != nil && ctx.Err() == nil {
			m.log.Warn("pods: local-path volume not cleaned up; will retry", "volume", pv.Name, "err", err)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: clean,
		UpdateFunc: func(_, n any) { clean(n) }}); err != nil {
		m.log.Error("pods: watch volumes", "err", err)
		return
	}
	inf.Run(ctx.Done())
}

// cleanLocalPath removes a deleted local-path volume's directory (not
// following symbolic links out of it), then its finalizer.
func (m *Manager) cleanLocalPath(ctx context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.HostPath == nil {
		return fmt.Errorf("volume %s has the cleanup finalizer but no hostPath", pv.Name)
	}
	dir := filepath.Clean(pv.Spec.HostPath.Path)
	root := LocalPathRoot(m.cfg.DataDir)
	if filepath.Dir(dir) != root || strings.HasPrefix(filepath.Base(dir), ".") {
		return fmt.Errorf("volume %s: path %q is not a directory of %s: not removed", pv.Name, pv.Spec.HostPath.Path, root)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("volume %s: %w", pv.Name, err)
	}
	var keep []string
	for _, f := range pv.Finalizers {
		if f != localPathFinalizer {
			keep = append(keep, f)
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": keep, "resourceVersion": pv.ResourceVersion}})
	if err != nil {
		return err
	}
	if err := m.cfg.Client.Patch(types.MergePatchType).Resource("persistentvolumes").Name(pv.Name).Body(patch).Do(ctx).Error(); err != nil {
		return fmt.Errorf("volume %s: remove the finalizer: %w", pv.Name, err)
	}
	m.log.Info("pods: local-path volume removed", "volume", pv.Name, "path", dir)
	return nil
}
