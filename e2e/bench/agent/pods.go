package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/isle-cluster/isle/node/island"
)

// imageRepo is the pods' image on the island's registry.
const imageRepo = "isle/busybox:1"

// pushImage pushes img to the island's registry and returns the name pods
// pull it by (registry.island/...).
func pushImage(ctx context.Context, st *island.State, img v1.Image) (string, error) {
	ref, err := name.ParseReference(st.RegistryAddr()+"/"+imageRepo, name.Insecure)
	if err != nil {
		return "", fmt.Errorf("push: %w", err)
	}
	slog.Info("pushing the pods' image", "to", ref.String())
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	return island.RegistryHost + "/" + imageRepo, nil
}

// Limits of the waits for pods.
const (
	runningWithin = 2 * time.Minute // after the last pod's creation
	goneWithin    = time.Minute     // after a pod's deletion
)

// podLabel marks the bench's pods.
const podLabel = "app=agentbench"

// podRunner runs the bench's pods on one board.
type podRunner struct {
	cs    kubernetes.Interface
	node  string       // the board's Node: the pods are bound to it
	image string       // the pods' image
	alive func() error // an error once the board's isle has exited
}

// seen is a pod the watch showed Running, and when.
type seen struct {
	name string
	at   time.Time
}

// start creates the named pods bound to the node, one every interval, and
// returns for each (in the order named) the time from its creation, which
// binds it, to the watch showing it Running.
func (r *podRunner) start(ctx context.Context, names []string, interval time.Duration) ([]time.Duration, error) {
	w, err := r.cs.CoreV1().Pods(metav1.NamespaceDefault).Watch(ctx, metav1.ListOptions{LabelSelector: podLabel})
	if err != nil {
		return nil, fmt.Errorf("pods: watch: %w", err)
	}
	defer w.Stop()
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	// Buffered for every pod: the watcher never blocks, and ends when the
	// watch is stopped.
	running := make(chan seen, len(names))
	go watchRunning(w, want, running)

	created := make(map[string]time.Time, len(names))
	took := make(map[string]time.Duration, len(names))
	next := time.NewTimer(0) // the next creation
	defer next.Stop()
	check := time.NewTicker(time.Second)
	defer check.Stop()
	var deadline <-chan time.Time // set after the last creation
	for i := 0; len(took) < len(names); {
		select {
		case <-next.C:
			n := names[i]
			created[n] = time.Now() // before the watch can see it
			if _, err := r.cs.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, r.pod(n), metav1.CreateOptions{}); err != nil {
				return nil, fmt.Errorf("pods: create %s: %w", n, err)
			}
			if i++; i < len(names) {
				next.Reset(interval)
			} else {
				deadline = time.After(runningWithin)
			}
		case s, ok := <-running:
			if !ok {
				return nil, fmt.Errorf("pods: the watch ended with %d of %d pods Running", len(took), len(names))
			}
			took[s.name] = s.at.Sub(created[s.name])
		case <-deadline:
			return nil, fmt.Errorf("pods: %d of %d pods Running %v after the last was created; see kubectl describe pod", len(took), len(names), runningWithin)
		case <-check.C:
			if err := r.alive(); err != nil {
				return nil, fmt.Errorf("pods: %w", err)
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("pods: %w", ctx.Err())
		}
	}
	out := make([]time.Duration, len(names))
	for i, n := range names {
		out[i] = took[n]
	}
	return out, nil
}

// watchRunning sends, for each pod in want, the first time the watch
// shows it Running; it closes out when the watch ends.
func watchRunning(w watch.Interface, want map[string]bool, out chan<- seen) {
	defer close(out)
	sent := make(map[string]bool, len(want))
	for ev := range w.ResultChan() {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || ev.Type == watch.Deleted || p.Status.Phase != corev1.PodRunning || !want[p.Name] || sent[p.Name] {
			continue
		}
		sent[p.Name] = true
		out <- seen{p.Name, time.Now()}
	}
}

// pod is a bench pod: busybox sleeping, bound to the node.
func (r *podRunner) pod(name string) *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "agentbench"}},
		Spec: corev1.PodSpec{
			NodeName:                      r.node,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "c", Image: r.image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sleep", "3600"}}},
		},
	}
}

// remove deletes the pod and waits until it is gone.
func (r *podRunner) remove(ctx context.Context, name string) error {
	pods := r.cs.CoreV1().Pods(metav1.NamespaceDefault)
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("pods: delete %s: %w", name, err)
	}
	deadline := time.Now().Add(goneWithin)
	for {
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("pods: %w", ctx.Err())
		case time.Now().After(deadline):
			return fmt.Errorf("pods: %s still there %v after its deletion; see kubectl describe pod", name, goneWithin)
		}
		if err := r.alive(); err != nil {
			return fmt.Errorf("pods: %w", err)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("pods: %w", err)
		}
	}
}
