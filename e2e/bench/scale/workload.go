package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// The workload: Deployments of replicasPer pods, each with a ClusterIP
// Service, deploymentsPerNS to a namespace (1,000 pods), and one Ingress.
const (
	replicasPer      = 50
	deploymentsPerNS = 20
	apiNamespace     = "scale-api" // the API measures' ConfigMaps
)

func nsOf(d int) string       { return fmt.Sprintf("scale-%d", d/deploymentsPerNS) }
func deployName(d int) string { return fmt.Sprintf("d-%03d", d) }

// addDeployments creates Deployments from, from+1, ... up to n-1, with their
// namespaces and Services, and the Ingress with the first.
func addDeployments(ctx context.Context, c kubernetes.Interface, from, n int) error {
	for d := from; d < n; d++ {
		ns := nsOf(d)
		if d%deploymentsPerNS == 0 {
			if err := ensureNamespace(ctx, c, ns); err != nil {
				return err
			}
		}
		name, labels := deployName(d), map[string]string{"app": deployName(d)}
		replicas := int32(replicasPer)
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "hollow/app:1",
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}}}}
		if _, err := c.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create Deployment %s/%s: %w", ns, name, err)
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Selector: labels,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}}
		if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create Service %s/%s: %w", ns, name, err)
		}
		if d == 0 {
			prefix := networkingv1.PathTypePrefix
			ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
				Host: "web.scale.test", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: name, Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}}
			if _, err := c.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create Ingress: %w", err)
			}
		}
	}
	return nil
}

func ensureNamespace(ctx context.Context, c kubernetes.Interface, ns string) error {
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Namespace %s: %w", ns, err)
	}
	return nil
}

// podCounter follows every pod through a watch (as a controller would)
// and counts those bound and those Running and Ready, and when the count
// of bound pods last grew.
type podCounter struct {
	mu        sync.Mutex
	bound     map[string]bool
	running   map[string]bool
	lastBound time.Time
}

func followPods(ctx context.Context, c kubernetes.Interface) (*podCounter, error) {
	pc := &podCounter{bound: map[string]bool{}, running: map[string]bool{}}
	inf := cache.NewSharedIndexInformer(cache.NewListWatchFromClient(c.CoreV1().RESTClient(), "pods", "", fields.Everything()),
		&corev1.Pod{}, 0, cache.Indexers{})
	// Only what is counted is kept.
	if err := inf.SetTransform(func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion},
				Spec: corev1.PodSpec{NodeName: p.Spec.NodeName}, Status: corev1.PodStatus{Phase: p.Status.Phase, Conditions: p.Status.Conditions}}, nil
		}
		return obj, nil
	}); err != nil {
		return nil, err
	}
	set := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		key := p.Namespace + "/" + p.Name
		pc.mu.Lock()
		defer pc.mu.Unlock()
		if p.Spec.NodeName != "" && !pc.bound[key] {
			pc.bound[key], pc.lastBound = true, time.Now()
		}
		pc.running[key] = p.Status.Phase == corev1.PodRunning && ready(p)
	}
	del := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			pc.mu.Lock()
			delete(pc.bound, p.Namespace+"/"+p.Name)
			delete(pc.running, p.Namespace+"/"+p.Name)
			pc.mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: set, UpdateFunc: func(_, n any) { set(n) }, DeleteFunc: del}); err != nil {
		return nil, err
	}
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, ctx.Err()
	}
	return pc, nil
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// counts returns the pods bound, the pods Running and Ready, and when
// the last pod was bound.
func (pc *podCounter) counts() (bound, running int, lastBound time.Time) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, r := range pc.running {
		if r {
			running++
		}
	}
	return len(pc.bound), running, pc.lastBound
}

// waitPods waits until want pods are bound and Running; it returns when
// the last was bound and when the last became Running.
func (pc *podCounter) waitPods(ctx context.Context, want int, d time.Duration) (boundAt, runningAt time.Time, err error) {
	deadline := time.Now().Add(d)
	for {
		bound, running, last := pc.counts()
		if bound >= want && running >= want {
			return last, time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, time.Time{}, fmt.Errorf("wait for %d pods: %d bound, %d running after %v", want, bound, running, d)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, time.Time{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitNodesReady waits until want Nodes are Ready with a pod CIDR.
func waitNodesReady(ctx context.Context, c kubernetes.Interface, want int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		nl, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		n := 0
		if err == nil {
			for i := range nl.Items {
				if nodeReady(&nl.Items[i]) && nl.Items[i].Spec.PodCIDR != "" {
					n++
				}
			}
			if n >= want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for %d Nodes Ready: %d after %v (%v)", want, n, d, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
