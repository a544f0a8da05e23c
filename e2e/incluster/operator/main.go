// Command operator is the in-cluster operator of isle's e2e tests: a
// controller-runtime manager as charts ship them. It starts with
// rest.InClusterConfig() (its pod's service-account token), takes the
// Lease "isle-operator" in its namespace (leader election), and answers
// every ConfigMap labelled isle.dev/ask=yes in its namespace with
// data.answer "seen by POD; N nodes" (nodes read cluster-wide, so it needs
// a ClusterRole too). Every refusal by the API server is logged as
// "forbidden: …"; when it loses its Lease it exits 1.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

const askLabel = "isle.dev/ask"

type answerer struct {
	client.Client
	pod string
}

func (a *answerer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var cm corev1.ConfigMap
	if err := a.Get(ctx, req.NamespacedName, &cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var nodes corev1.NodeList
	if err := a.List(ctx, &nodes); err != nil {
		return ctrl.Result{}, said(ctx, "list nodes", err)
	}
	answer := fmt.Sprintf("seen by %s; %d nodes", a.pod, len(nodes.Items))
	if cm.Data["answer"] == answer {
		return ctrl.Result{}, nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data["answer"] = answer
	if err := a.Update(ctx, &cm); err != nil {
		return ctrl.Result{}, said(ctx, "answer "+cm.Name, err)
	}
	log.Info("reconciled", "configmap", cm.Name, "answer", answer)
	return ctrl.Result{}, nil
}

// said logs a refusal by the API server as such.
func said(ctx context.Context, what string, err error) error {
	if apierrors.IsForbidden(err) {
		ctrl.LoggerFrom(ctx).Error(err, "forbidden: "+what)
	}
	return err
}

func main() {
	ctrl.SetLogger(zap.New())
	log := ctrl.Log.WithName("operator")
	if err := run(); err != nil {
		log.Error(err, "stopping")
		os.Exit(1)
	}
}

func run() error {
	ns, pod := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	if ns == "" || pod == "" {
		return errors.New("POD_NAMESPACE and POD_NAME must be set (the downward API)")
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("in-cluster config: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		LeaderElection:          true,
		LeaderElectionID:        "isle-operator",
		LeaderElectionNamespace: ns,
		// Leaving at once when the Lease is lost, as the API server
		// refuses its renewal, is what the test watches for.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("answerer").
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[askLabel] == "yes"
		}))).
		Complete(&answerer{Client: mgr.GetClient(), pod: pod})
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	go func() {
		<-mgr.Elected()
		ctrl.Log.WithName("operator").Info("elected: the leader", "lease", ns+"/isle-operator", "identity", pod)
	}()
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	return nil
}
