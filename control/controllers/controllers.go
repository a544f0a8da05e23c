// Package controllers is the ordered table of the reconcilers that run on
// the Raft leader only, each a package below this one built on kit. They
// read and write through the registry, the same write path as the API.
package controllers

import (
	"context"
	"log/slog"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/controllers/caexpiry"
	"github.com/isle-cluster/isle/control/controllers/clusterroleaggregation"
	"github.com/isle-cluster/isle/control/controllers/cronjob"
	"github.com/isle-cluster/isle/control/controllers/csrsigning"
	"github.com/isle-cluster/isle/control/controllers/daemonset"
	"github.com/isle-cluster/isle/control/controllers/deployment"
	"github.com/isle-cluster/isle/control/controllers/disruption"
	"github.com/isle-cluster/isle/control/controllers/endpoints"
	"github.com/isle-cluster/isle/control/controllers/endpointslice"
	"github.com/isle-cluster/isle/control/controllers/gc"
	"github.com/isle-cluster/isle/control/controllers/hpa"
	"github.com/isle-cluster/isle/control/controllers/ingressstatus"
	"github.com/isle-cluster/isle/control/controllers/job"
	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/controllers/namespace"
	"github.com/isle-cluster/isle/control/controllers/nodelifecycle"
	"github.com/isle-cluster/isle/control/controllers/quota"
	"github.com/isle-cluster/isle/control/controllers/replicaset"
	"github.com/isle-cluster/isle/control/controllers/rootca"
	"github.com/isle-cluster/isle/control/controllers/sasecrets"
	"github.com/isle-cluster/isle/control/controllers/statefulset"
	"github.com/isle-cluster/isle/control/controllers/volumes"
	"github.com/isle-cluster/isle/control/crd"
	"github.com/isle-cluster/isle/control/events"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/scheduler"
)

// Option configures a controller of the table.
type Option func(*tableOptions)

type tableOptions struct {
	hpa      hpa.Config
	liveness nodelifecycle.Liveness
	nodes    nodelifecycle.Config
	activity func()
	rootCA   func() []byte
	signCSR  csrsigning.Sign
	saIssue  sasecrets.Issue
	caExpiry *caexpiry.Config
}

// WithActivity calls f at every action a controller reports (every Event
// it records): the leader's activity LED. f must not block.
func WithActivity(f func()) Option {
	return func(o *tableOptions) { o.activity = f }
}

// WithHPA configures the HorizontalPodAutoscaler controller of the table.
func WithHPA(cfg hpa.Config) Option {
	return func(o *tableOptions) { o.hpa = cfg }
}

// WithNodeLifecycle runs the node lifecycle controller, which learns the
// boards' liveness from l, as cfg says; without it the table has none.
func WithNodeLifecycle(l nodelifecycle.Liveness, cfg nodelifecycle.Config) Option {
	return func(o *tableOptions) { o.liveness, o.nodes = l, cfg }
}

// WithCSRSigning runs the signer of kubernetes.io/kube-apiserver-client
// CertificateSigningRequests, which signs with sign.
func WithCSRSigning(sign csrsigning.Sign) Option {
	return func(o *tableOptions) { o.signCSR = sign }
}

// WithServiceAccountSecrets runs the filler of
// kubernetes.io/service-account-token Secrets, which signs their tokens
// with issue (and puts the WithRootCA bundle in them).
func WithServiceAccountSecrets(issue sasecrets.Issue) Option {
	return func(o *tableOptions) { o.saIssue = issue }
}

// WithRootCA gives the root-CA publisher the cluster CA's certificate
// (PEM); without it the publisher does not run.
func WithRootCA(bundle func() []byte) Option {
	return func(o *tableOptions) { o.rootCA = bundle }
}

// WithCAExpiry runs the CA expiry warning (package caexpiry); without it
// the table has none.
func WithCAExpiry(cfg caexpiry.Config) Option {
	return func(o *tableOptions) { o.caExpiry = &cfg }
}

// Table returns every controller, in start order.
func Table(store *registry.Store, log *slog.Logger, opts ...Option) []kit.Controller {
	var o tableOptions
	for _, opt := range opts {
		opt(&o)
	}
	ev := events.NewBroadcaster(events.Config{Store: store, Logger: log.With("controller", "events"), OnEvent: o.activity})
	table := []kit.Controller{
		ev,
		namespace.New(store, log.With("controller", "namespace")),
		rootca.New(store, log.With("controller", "root-ca-cert-publisher"), o.rootCA),
		clusterroleaggregation.New(store, log.With("controller", clusterroleaggregation.Name)),
		gc.New(store, log.With("controller", "garbagecollector")),
		deployment.New(store, log.With("controller", "deployment"), ev.Recorder("deployment-controller")),
		replicaset.New(store, log.With("controller", "replicaset"), ev.Recorder("replicaset-controller")),
		disruption.New(store, log.With("controller", "disruption"), ev.Recorder("controllermanager")),
		quota.New(store, log.With("controller", "resourcequota")),
		cronjob.New(store, log.With("controller", "cronjob"), ev.Recorder("cronjob-controller")),
		statefulset.New(store, log.With("controller", "statefulset"), ev.Recorder("statefulset-controller")),
		replicaset.NewReplicationControllers(store, log.With("controller", "replicationcontroller"), ev.Recorder("replication-controller")),
		endpointslice.New(store, log.With("controller", "endpointslice")),
		endpoints.New(store, log.With("controller", "endpoints")),
		ingressstatus.New(store, log.With("controller", "ingress-status")),
		daemonset.New(store, log.With("controller", "daemonset"), ev.Recorder("daemonset-controller")),
		job.New(store, log.With("controller", "job"), ev.Recorder("job-controller")),
		volumes.New(store, log.With("controller", "persistentvolume"), ev),
		hpa.New(store, log.With("controller", "horizontalpodautoscaling"), ev.Recorder("horizontal-pod-autoscaler"), o.hpa),
		scheduler.New(scheduler.Config{Store: store, Events: ev.Recorder(scheduler.Name), Logger: log.With("controller", "scheduler")}),
	}
	if o.liveness != nil {
		table = append(table, nodelifecycle.New(store, o.liveness, o.nodes, log.With("controller", "nodelifecycle")))
	}
	if o.signCSR != nil {
		table = append(table, csrsigning.New(store, log.With("controller", csrsigning.Name), o.signCSR))
	}
	if o.saIssue != nil && o.rootCA != nil {
		table = append(table, sasecrets.New(store, log.With("controller", sasecrets.Name), o.saIssue, o.rootCA))
	}
	if o.caExpiry != nil {
		table = append(table, caexpiry.New(*o.caExpiry, log.With("controller", "ca-expiry"), ev.Recorder("isle-certificates")))
	}
	if _, ok := store.Resources().Lookup(crd.GroupVersion.WithResource("customresourcedefinitions")); ok {
		table = append(table, crd.NewController(store, log.With("controller", "customresourcedefinition"), func() metav1.Time { return metav1.Now().Rfc3339Copy() }))
	}
	return table
}

// RunAll runs every controller of the table until ctx ends.
func RunAll(ctx context.Context, table []kit.Controller, log *slog.Logger) {
	var wg sync.WaitGroup
	for _, c := range table {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log.Info("controllers: started", "controller", c.Name())
			c.Run(ctx)
		}()
	}
	wg.Wait()
}
