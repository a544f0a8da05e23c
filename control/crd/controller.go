package crd

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// owner names a CRD's resources in the registry.
func owner(name string) string { return "crd:" + name }

// Server serves, on every server, the kinds of the established CRDs: it
// follows the CRDs in the store and adds, changes and removes their
// resources in the registry as they come, change and go.
type Server struct {
	store  *registry.Store
	log    *slog.Logger
	res    *registry.Resource
	poster Poster
}

// NewServer returns the server of the CRDs' kinds; store must serve
// Resource().
func NewServer(store *registry.Store, poster Poster, log *slog.Logger) *Server {
	return &Server{store: store, log: log, poster: poster, res: kit.MustLookup(store, GroupVersion.WithResource("customresourcedefinitions"))}
}

// Run follows the CRDs until ctx ends.
func (s *Server) Run(ctx context.Context) {
	served := map[string]bool{}
	loop := kit.Loop{Store: s.store, Log: s.log, Name: "crd server"}
	loop.Run(ctx, kit.WatchOf(s.res, func() {
		// Opened again: the CRDs deleted meanwhile are not in the list.
		list, err := s.store.List(ctx, s.res, "", metav1.ListOptions{})
		if err != nil {
			return
		}
		present := map[string]bool{}
		for _, c := range list.(*CustomResourceDefinitionList).Items {
			present[c.Name] = true
		}
		for name := range served {
			if !present[name] {
				s.serve(name, nil)
				delete(served, name)
			}
		}
	}, func(typ watch.EventType, c *CustomResourceDefinition) {
		if typ == watch.Deleted || !isTrue(c, Established) {
			s.serve(c.Name, nil)
			delete(served, c.Name)
			return
		}
		s.serve(c.Name, c)
		served[c.Name] = true
	}))
}

// serve sets the resources of CRD name (c nil: none).
func (s *Server) serve(name string, c *CustomResourceDefinition) {
	var rs []*registry.Resource
	if c != nil {
		var err error
		if rs, err = Resources(c, s.poster); err != nil {
			s.log.Warn("crd server: not served", "crd", name, "err", err)
			return
		}
	}
	if err := s.store.Resources().Set(owner(name), rs); err != nil {
		s.log.Warn("crd server: not served", "crd", name, "err", err)
	}
}

func isTrue(c *CustomResourceDefinition, typ string) bool {
	i := slices.IndexFunc(c.Status.Conditions, func(cd CustomResourceDefinitionCondition) bool { return cd.Type == typ })
	return i >= 0 && c.Status.Conditions[i].Status == string(metav1.ConditionTrue)
}

// Controller is kube-apiserver's CRD controllers on the leader: it
// accepts a CRD's names unless another CRD of its group holds them, then
// marks it established; it records the versions objects are stored in;
// and once a CRD is deleted, it deletes its objects, then lets it go.
type Controller struct {
	store *registry.Store
	log   *slog.Logger
	now   func() metav1.Time
}

// NewController returns the controller.
func NewController(store *registry.Store, log *slog.Logger, now func() metav1.Time) *Controller {
	return &Controller{store: store, log: log, now: now}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "customresourcedefinition" }

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	res := kit.MustLookup(c.store, GroupVersion.WithResource("customresourcedefinitions"))
	crds := kit.NewCache[*CustomResourceDefinition]()
	pending := map[string]bool{}
	loop := kit.Loop{Store: c.store, Log: c.log, Name: "crd controller", ResyncEvery: resyncEvery, Resync: func() {
		for name := range pending {
			c.sync(ctx, res, crds, name, pending)
		}
	}}
	loop.Run(ctx, crds.Watch(res, nil, func(typ watch.EventType, old, obj *CustomResourceDefinition) {
		if typ == watch.Deleted {
			delete(pending, obj.Name)
			return
		}
		c.sync(ctx, res, crds, obj.Name, pending)
		// A CRD whose names another held may have them now.
		for _, other := range crds.All() {
			if other.Spec.Group == obj.Spec.Group && other.Name != obj.Name && !isTrue(other, NamesAccepted) {
				c.sync(ctx, res, crds, other.Name, pending)
			}
		}
	}))
}

// resyncEvery is how often a CRD whose objects are still being deleted is
// looked at again.
const resyncEvery = 2 * time.Second

func (c *Controller) sync(ctx context.Context, res *registry.Resource, crds *kit.Cache[*CustomResourceDefinition], name string, pending map[string]bool) {
	cur, ok := crds.Get(name)
	if !ok {
		return
	}
	if cur.DeletionTimestamp != nil {
		pending[name] = !c.cleanUp(ctx, res, cur)
		if !pending[name] {
			delete(pending, name)
		}
		return
	}
	_, err := c.store.Mutate(ctx, res, "", name, "status", func(obj runtime.Object) error {
		crd := obj.(*CustomResourceDefinition)
		conflict := namesConflict(crd, crds.All())
		if conflict == "" {
			crd.Status.AcceptedNames = crd.Spec.Names
			c.setCondition(crd, NamesAccepted, metav1.ConditionTrue, "NoConflicts", "no conflicts found")
			c.setCondition(crd, Established, metav1.ConditionTrue, "InitialNamesAccepted", "the initial names have been accepted")
		} else {
			c.setCondition(crd, NamesAccepted, metav1.ConditionFalse, "NameConflict", conflict)
			if !isTrue(crd, Established) {
				c.setCondition(crd, Established, metav1.ConditionFalse, "NotAccepted", "not all names are accepted")
			}
		}
		for _, v := range crd.Spec.Versions {
			if v.Storage && !slices.Contains(crd.Status.StoredVersions, v.Name) {
				crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
			}
		}
		return nil
	})
	if err != nil && !apierrors.IsNotFound(err) {
		c.log.Warn("crd controller: status", "crd", name, "err", err)
	}
}

// namesConflict says which of c's names another CRD of its group holds.
func namesConflict(c *CustomResourceDefinition, all []*CustomResourceDefinition) string {
	for _, o := range all {
		if o.Name == c.Name || o.Spec.Group != c.Spec.Group {
			continue
		}
		an := o.Status.AcceptedNames
		taken := append([]string{an.Plural, an.Singular}, an.ShortNames...)
		n := c.Spec.Names
		switch {
		case slices.Contains(taken, n.Plural):
			return fmt.Sprintf("%q is already in use", n.Plural)
		case n.Singular != "" && slices.Contains(taken, n.Singular):
			return fmt.Sprintf("%q is already in use", n.Singular)
		case an.Kind != "" && (an.Kind == n.Kind || an.ListKind == n.Kind):
			return fmt.Sprintf("%q is already in use", n.Kind)
		case an.Kind != "" && (an.Kind == n.ListKind || an.ListKind == n.ListKind):
			return fmt.Sprintf("%q is already in use", n.ListKind)
		}
		for _, s := range n.ShortNames {
			if slices.Contains(taken, s) {
				return fmt.Sprintf("%q is already in use", s)
			}
		}
	}
	return ""
}

func (c *Controller) setCondition(crd *CustomResourceDefinition, typ string, status metav1.ConditionStatus, reason, msg string) {
	i := slices.IndexFunc(crd.Status.Conditions, func(cd CustomResourceDefinitionCondition) bool { return cd.Type == typ })
	if i < 0 {
		crd.Status.Conditions = append(crd.Status.Conditions, CustomResourceDefinitionCondition{Type: typ})
		i = len(crd.Status.Conditions) - 1
	}
	cd := &crd.Status.Conditions[i]
	if cd.Status != string(status) {
		cd.LastTransitionTime = c.now()
	}
	cd.Status, cd.Reason, cd.Message = string(status), reason, msg
}

// cleanUp deletes the objects of a deleted CRD and, once none is left,
// removes its finalizer; it reports whether the CRD is done.
func (c *Controller) cleanUp(ctx context.Context, res *registry.Resource, crd *CustomResourceDefinition) bool {
	if !slices.Contains(crd.Finalizers, Finalizer) {
		return true
	}
	if !isTrue(crd, Terminating) {
		_, err := c.store.Mutate(ctx, res, "", crd.Name, "status", func(obj runtime.Object) error {
			c.setCondition(obj.(*CustomResourceDefinition), Terminating, metav1.ConditionTrue, "InstanceDeletionInProgress", "CustomResource deletion is in progress")
			return nil
		})
		if err != nil && !apierrors.IsNotFound(err) {
			c.log.Warn("crd controller: terminating", "crd", crd.Name, "err", err)
		}
	}
	left := 0
	for _, v := range crd.Spec.Versions {
		if !v.Storage {
			continue
		}
		r, ok := c.store.Resources().Lookup(GroupVersionResourceOf(crd, v.Name))
		if !ok {
			break // never served: nothing stored
		}
		if c.store.Count(r, "") == 0 {
			break
		}
		bg := metav1.DeletePropagationBackground
		if _, err := c.store.DeleteCollection(ctx, r, "", metav1.ListOptions{}, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			c.log.Warn("crd controller: delete objects", "crd", crd.Name, "err", err)
		}
		left = c.store.Count(r, "")
	}
	if left > 0 {
		return false
	}
	_, err := c.store.Mutate(ctx, res, "", crd.Name, "", func(obj runtime.Object) error {
		o := obj.(*CustomResourceDefinition)
		o.Finalizers = slices.DeleteFunc(o.Finalizers, func(f string) bool { return f == Finalizer })
		return nil
	})
	if err != nil && !apierrors.IsNotFound(err) {
		c.log.Warn("crd controller: finalize", "crd", crd.Name, "err", err)
		return false
	}
	c.log.Info("crd controller: objects deleted, CRD removed", "crd", crd.Name)
	return true
}
