// Package sasecrets fills kubernetes.io/service-account-token Secrets
// (kube-controller-manager's serviceaccount-token controller): a Secret
// of that type gets its service account's uid, a token that never
// expires, the cluster CA's certificate and its namespace; a Secret whose
// service account is gone, or was made again, is deleted, and so are a
// service account's Secrets when it is deleted. As upstream since 1.24,
// none is made unasked.
package sasecrets

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// Name is the controller's name in the table.
const Name = "serviceaccount-token"

// Issue signs the token of Secret secret of service account sa (uid
// saUID) in namespace ns (satoken.IssueLegacy with the cluster's key).
type Issue func(ns, sa, saUID, secret string) (string, error)

// Controller fills and deletes the Secrets.
type Controller struct {
	store  *registry.Store
	log    *slog.Logger
	issue  Issue
	bundle func() []byte
}

// New returns the controller, which signs with issue and puts bundle's
// certificates in ca.crt; without issue it does not run.
func New(store *registry.Store, log *slog.Logger, issue Issue, bundle func() []byte) *Controller {
	return &Controller{store: store, log: log, issue: issue, bundle: bundle}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return Name }

// resyncEvery is how often every token Secret is looked at again (a
// write that failed, a CA replaced).
const resyncEvery = 5 * time.Minute

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	if c.issue == nil {
		return
	}
	secRes := kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("secrets"))
	saRes := kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("serviceaccounts"))
	loop := kit.Loop{Store: c.store, Log: c.log, Name: Name, ResyncEvery: resyncEvery, Resync: func() { c.resync(ctx, secRes, saRes) }}
	loop.Run(ctx,
		kit.WatchOf(secRes, nil, func(typ watch.EventType, s *corev1.Secret) {
			if typ != watch.Deleted && s.Type == corev1.SecretTypeServiceAccountToken {
				c.sync(ctx, secRes, saRes, s)
			}
		}),
		kit.Watch{Res: saRes, ChangesOnly: true, Handle: func(ev registry.WatchEvent) {
			if sa, ok := ev.Object.(*corev1.ServiceAccount); ok && ev.Type == watch.Deleted {
				c.deleteSecretsOf(ctx, secRes, sa)
			}
		}})
}

// resync looks at every token Secret again.
func (c *Controller) resync(ctx context.Context, secRes, saRes *registry.Resource) {
	list, err := c.store.List(ctx, secRes, "", metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		c.log.Warn("serviceaccount-token: list secrets", "err", err)
		return
	}
	for i := range list.(*corev1.SecretList).Items {
		if s := &list.(*corev1.SecretList).Items[i]; s.Type == corev1.SecretTypeServiceAccountToken {
			c.sync(ctx, secRes, saRes, s)
		}
	}
}

// sync fills Secret s, or deletes it if its service account is not the
// one it was made for.
func (c *Controller) sync(ctx context.Context, secRes, saRes *registry.Resource, s *corev1.Secret) {
	if s.DeletionTimestamp != nil {
		return
	}
	name, uid := s.Annotations[corev1.ServiceAccountNameKey], s.Annotations[corev1.ServiceAccountUIDKey]
	obj, err := c.store.Get(ctx, saRes, s.Namespace, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		c.deleteSecret(ctx, secRes, s, "its service account "+name+" does not exist")
		return
	case err != nil:
		c.log.Warn("serviceaccount-token: get the service account", "namespace", s.Namespace, "serviceaccount", name, "err", err)
		return
	}
	sa := obj.(*corev1.ServiceAccount)
	if uid != "" && uid != string(sa.UID) {
		c.deleteSecret(ctx, secRes, s, "its service account "+name+" was made again")
		return
	}
	ca := c.bundle()
	if uid != "" && len(s.Data[corev1.ServiceAccountTokenKey]) > 0 && bytes.Equal(s.Data[corev1.ServiceAccountRootCAKey], ca) &&
		string(s.Data[corev1.ServiceAccountNamespaceKey]) == s.Namespace {
		return
	}
	_, err = c.store.Mutate(ctx, secRes, s.Namespace, s.Name, "", func(o runtime.Object) error {
		cur := o.(*corev1.Secret)
		if cur.UID != s.UID || cur.Type != corev1.SecretTypeServiceAccountToken || cur.Annotations[corev1.ServiceAccountNameKey] != name {
			return errChanged
		}
		if cur.Annotations[corev1.ServiceAccountUIDKey] != "" && cur.Annotations[corev1.ServiceAccountUIDKey] != string(sa.UID) {
			return errChanged
		}
		if cur.Data == nil {
			cur.Data = map[string][]byte{}
		}
		if len(cur.Data[corev1.ServiceAccountTokenKey]) == 0 {
			token, err := c.issue(cur.Namespace, sa.Name, string(sa.UID), cur.Name)
			if err != nil {
				return err
			}
			cur.Data[corev1.ServiceAccountTokenKey] = []byte(token)
		}
		cur.Annotations[corev1.ServiceAccountUIDKey] = string(sa.UID)
		cur.Data[corev1.ServiceAccountRootCAKey] = ca
		cur.Data[corev1.ServiceAccountNamespaceKey] = []byte(cur.Namespace)
		return nil
	})
	switch {
	case err == nil:
		c.log.Info("serviceaccount-token: secret filled", "namespace", s.Namespace, "secret", s.Name, "serviceaccount", name)
	case !errors.Is(err, errChanged) && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil:
		c.log.Warn("serviceaccount-token: fill the secret", "namespace", s.Namespace, "secret", s.Name, "err", err)
	}
}

var errChanged = errors.New("the secret changed")

// deleteSecretsOf deletes the token Secrets of service account sa, just
// deleted.
func (c *Controller) deleteSecretsOf(ctx context.Context, secRes *registry.Resource, sa *corev1.ServiceAccount) {
	list, err := c.store.List(ctx, secRes, sa.Namespace, metav1.ListOptions{})
	if err != nil {
		c.log.Warn("serviceaccount-token: list secrets", "namespace", sa.Namespace, "err", err)
		return
	}
	for i := range list.(*corev1.SecretList).Items {
		s := &list.(*corev1.SecretList).Items[i]
		if s.Type == corev1.SecretTypeServiceAccountToken && s.Annotations[corev1.ServiceAccountNameKey] == sa.Name &&
			(s.Annotations[corev1.ServiceAccountUIDKey] == "" || s.Annotations[corev1.ServiceAccountUIDKey] == string(sa.UID)) {
			c.deleteSecret(ctx, secRes, s, "its service account "+sa.Name+" was deleted")
		}
	}
}

// deleteSecret deletes Secret s (that one: by uid), saying why.
func (c *Controller) deleteSecret(ctx context.Context, secRes *registry.Resource, s *corev1.Secret, why string) {
	uid := s.UID
	_, _, err := c.store.Delete(ctx, secRes, s.Namespace, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case err == nil:
		c.log.Info("serviceaccount-token: secret deleted", "namespace", s.Namespace, "secret", s.Name, "why", why)
	case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil:
		c.log.Warn("serviceaccount-token: delete the secret", "namespace", s.Namespace, "secret", s.Name, "err", err)
	}
}
