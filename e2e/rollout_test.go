package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// playKubelet marks every scheduled pod Running and Ready until ctx ends:
// the part of the node agent that runs containers is not written yet.
func playKubelet(ctx context.Context, clients []*kubernetes.Clientset) {
	for ctx.Err() == nil {
		for _, cs := range clients {
			list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				continue // this server is down; the next one answers
			}
			for i := range list.Items {
				p := &list.Items[i]
				if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodRunning {
					continue
				}
				p.Status.Phase = corev1.PodRunning
				p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue,
					LastTransitionTime: metav1.Now()})
				p.Status.PodIP = "10.42.0.9"
				_, _ = cs.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRolloutSurvivesLeaderKill: the controllers run on the Raft leader;
// killed mid-rollout, the rollout finishes on the new leader, with exactly
// the wanted pods and no duplicates.
func TestRolloutSurvivesLeaderKill(t *testing.T) {
	bin := isleBinary(t)
	c := startStore(t, bin, 3)
	var clients []*kubernetes.Clientset
	for _, m := range c.members {
		kc := filepath.Join(t.TempDir(), "kubeconfig")
		if out, err := exec.Command(bin, "kubeconfig", "--data-dir", m.dir, "-o", kc, "--server", "https://"+m.apiAddr()).CombinedOutput(); err != nil {
			t.Fatalf("kubeconfig: %v\n%s", err, out)
		}
		clients = append(clients, kubeClient(t, kc))
	}
	waitNodes(t, clients[0], "three Ready nodes", func(n map[string]*corev1.Node) bool {
		return ready(n["pi1"]) && ready(n["pi2"]) && ready(n["pi3"])
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go playKubelet(ctx, clients)

	const replicas = 6
	one := intstr.FromInt32(1)
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &one}},
			// Each new pod must stay ready 2 s before it counts: the rollout
			// takes several seconds, and the kill lands in the middle.
			MinReadySeconds: 2,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "127.0.0.1:5000/isle/hello:1.0"}}},
			},
		},
	}
	onAny := func(f func(cs *kubernetes.Clientset) error) error {
		var err error
		for _, cs := range clients {
			if err = f(cs); err == nil {
				return nil
			}
		}
		return err
	}
	if err := onAny(func(cs *kubernetes.Clientset) error {
		_, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rolledOut := func(image string) func() bool {
		return func() bool {
			var cur *appsv1.Deployment
			if onAny(func(cs *kubernetes.Clientset) error {
				var err error
				cur, err = cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
				return err
			}) != nil {
				return false
			}
			st := cur.Status
			return cur.Spec.Template.Spec.Containers[0].Image == image && st.ObservedGeneration >= cur.Generation &&
				st.UpdatedReplicas == replicas && st.Replicas == replicas && st.AvailableReplicas == replicas
		}
	}
	waitFor(t, 60*time.Second, "the first rollout", rolledOut(d.Spec.Template.Spec.Containers[0].Image))

	// Update the image, let the rollout start, kill the leader.
	const image2 = "127.0.0.1:5000/isle/hello:2.0"
	if err := onAny(func(cs *kubernetes.Clientset) error {
		cur, err := cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = image2
		_, err = cs.AppsV1().Deployments("default").Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the rollout under way", func() bool {
		var rss *appsv1.ReplicaSetList
		if onAny(func(cs *kubernetes.Clientset) error {
			var err error
			rss, err = cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{})
			return err
		}) != nil {
			return false
		}
		for _, rs := range rss.Items {
			if rs.Spec.Template.Spec.Containers[0].Image == image2 && rs.Status.AvailableReplicas >= 1 && rs.Status.AvailableReplicas < replicas {
				return true
			}
		}
		return false
	})
	lead := c.leader(t)
	lead.kill(t)
	t.Logf("killed the leader %s mid-rollout", lead.name)

	waitFor(t, 120*time.Second, "the rollout finished on the new leader", rolledOut(image2))
	// The killed board comes back: its agent finishes the deletions of the
	// pods evicted from it.
	lead.start(t)
	// Exactly the wanted pods: all of the new template, none twice.
	waitFor(t, 30*time.Second, "the old pods gone", func() bool {
		var pods *corev1.PodList
		if onAny(func(cs *kubernetes.Clientset) error {
			var err error
			pods, err = cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			return err
		}) != nil {
			return false
		}
		n := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				return false
			}
			if p.Spec.Containers[0].Image != image2 {
				return false
			}
			n++
		}
		if n > replicas {
			t.Fatalf("%d pods of the new template, want %d", n, replicas)
		}
		return n == replicas
	})
}

func ptrTo[T any](v T) *T { return &v }
