package controllers_test

import (
	"slices"
	"testing"

	"github.com/isle-cluster/isle/control/controllers"
	"github.com/isle-cluster/isle/control/controllers/deployment"
	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/controllers/nodelifecycle"
)

func TestDeploymentInTable(t *testing.T) {
	e := tabletest.NewStore(t)
	s, log := e.Store, e.Log
	for _, ctrl := range controllers.Table(s, log) {
		if ctrl.Name() == "deployment" {
			if _, ok := ctrl.(*deployment.Controller); !ok {
				t.Fatalf("the table's deployment controller is a %T", ctrl)
			}
			return
		}
	}
	t.Fatal("no deployment controller in the table")
}

// liveness knows no board.
type liveness struct{}

func (liveness) Boards() []nodelifecycle.Board { return nil }
func (liveness) Changed() <-chan struct{}      { return nil }

// TestTableNodeLifecycle: the node lifecycle controller is in the table,
// last, when the table is given the boards' liveness, and not otherwise.
func TestTableNodeLifecycle(t *testing.T) {
	e := tabletest.NewStore(t)
	s, log := e.Store, e.Log
	names := func(table []kit.Controller) []string {
		var out []string
		for _, c := range table {
			out = append(out, c.Name())
		}
		return out
	}
	if got := names(controllers.Table(s, log)); slices.Contains(got, "nodelifecycle") {
		t.Fatalf("node lifecycle controller in a table without liveness: %v", got)
	}
	got := names(controllers.Table(s, log, controllers.WithNodeLifecycle(liveness{}, nodelifecycle.Config{})))
	if got[len(got)-1] != "nodelifecycle" {
		t.Fatalf("table %v; want the node lifecycle controller last", got)
	}
}
