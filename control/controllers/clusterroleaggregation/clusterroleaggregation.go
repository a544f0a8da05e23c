// Package clusterroleaggregation fills in the rules of aggregated
// ClusterRoles (kube-controller-manager's clusterrole-aggregation).
package clusterroleaggregation

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// Name is the controller's name in the table, as upstream's.
const Name = "clusterrole-aggregation"

// Controller sets the rules of each ClusterRole with an aggregationRule
// to those of the other ClusterRoles its selectors match, in the order of
// the selectors and then of the roles' names, each rule once, as
// upstream does: a chart that ships a ClusterRole labelled to aggregate
// into another extends it.
type Controller struct {
	store *registry.Store
	log   *slog.Logger
}

// New returns the controller.
func New(store *registry.Store, log *slog.Logger) *Controller {
	return &Controller{store: store, log: log}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return Name }

// Run reconciles until ctx ends (when this member stops leading): any
// change of a ClusterRole may change what an aggregated one matches, so
// a change has them all looked at (a cluster has a few hundred at most),
// once for a burst of changes.
func (c *Controller) Run(ctx context.Context) {
	res := kit.MustLookup(c.store, rbacv1.SchemeGroupVersion.WithResource("clusterroles"))
	kick := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
				c.syncAll(ctx, res)
			}
		}
	}()
	loop := kit.Loop{Store: c.store, Log: c.log, Name: Name}
	loop.Run(ctx, kit.WatchOf(res, nil, func(watch.EventType, *rbacv1.ClusterRole) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}))
}

func (c *Controller) syncAll(ctx context.Context, res *registry.Resource) {
	list, err := c.store.List(ctx, res, "", metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		c.log.Warn("clusterrole-aggregation: list ClusterRoles", "err", err)
		return
	}
	roles := list.(*rbacv1.ClusterRoleList).Items
	slices.SortFunc(roles, func(a, b rbacv1.ClusterRole) int { return strings.Compare(a.Name, b.Name) })
	for i := range roles {
		if roles[i].AggregationRule == nil {
			continue
		}
		rules, ok := Aggregate(&roles[i], roles)
		if !ok || equality.Semantic.DeepEqual(rules, roles[i].Rules) {
			continue
		}
		_, err := c.store.Mutate(ctx, res, "", roles[i].Name, "", func(o runtime.Object) error {
			o.(*rbacv1.ClusterRole).Rules = rules
			return nil
		})
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			c.log.Warn("clusterrole-aggregation: update", "clusterrole", roles[i].Name, "err", err)
		}
	}
}

// Aggregate returns the rules of the roles (sorted by name) that role's
// aggregationRule selects; ok is false for a selector that does not
// parse.
func Aggregate(role *rbacv1.ClusterRole, roles []rbacv1.ClusterRole) (rules []rbacv1.PolicyRule, ok bool) {
	rules = []rbacv1.PolicyRule{}
	for _, ls := range role.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&ls)
		if err != nil {
			return nil, false
		}
		for i := range roles {
			if roles[i].Name == role.Name || !sel.Matches(labels.Set(roles[i].Labels)) {
				continue
			}
			for _, r := range roles[i].Rules {
				if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(have, r) }) {
					rules = append(rules, r)
				}
			}
		}
	}
	return rules, true
}
