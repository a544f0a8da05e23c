// Package controllers holds the reconcilers that run on the Raft leader
// only. They read and write through the registry, the same write path as
// the API. One ordered table lists them.
package controllers

import (
	"context"
	"log/slog"
	"sync"

	"github.com/isle-cluster/isle/control/registry"
)

// Controller is one reconciler.
type Controller interface {
	Name() string
	// Run reconciles until ctx ends (when this member stops leading).
	Run(ctx context.Context)
}

// Table returns every controller, in start order.
func Table(store *registry.Store, log *slog.Logger) []Controller {
	return []Controller{
		&namespaces{store: store, log: log.With("controller", "namespace")},
		&garbageCollector{store: store, log: log.With("controller", "garbagecollector")},
		newDeploymentController(store, log.With("controller", "deployment")),
		&replicaSets{store: store, log: log.With("controller", "replicaset")},
		&endpointSlices{store: store, log: log.With("controller", "endpointslice")},
	}
}

// RunAll runs every controller of the table until ctx ends.
func RunAll(ctx context.Context, table []Controller, log *slog.Logger) {
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
