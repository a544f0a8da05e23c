package agent

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// finishDeletions watches the pods bound to this board and completes the
// graceful deletion of those being deleted, as a kubelet does once their
// containers have stopped. This board runs no containers yet (the runtime
// comes with the containerd part of the agent), so there is nothing to
// stop: without this, a deleted pod would stay Terminating for ever and
// hold its PersistentVolumeClaim.
func finishDeletions(ctx context.Context, client *rest.RESTClient, node string, log *slog.Logger) error {
	lw := cache.NewListWatchFromClient(client, "pods", "", fields.OneTermEqualSelector("spec.nodeName", node))
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	finish := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.DeletionTimestamp == nil {
			return
		}
		zero := int64(0)
		err := client.Delete().Namespace(p.Namespace).Resource("pods").Name(p.Name).
			Body(&metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}}).
			Do(ctx).Error()
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			log.Warn("agent: finish a pod's deletion", "pod", p.Namespace+"/"+p.Name, "err", err)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: finish, UpdateFunc: func(_, n any) { finish(n) }}); err != nil {
		return err
	}
	inf.Run(ctx.Done())
	return nil
}
