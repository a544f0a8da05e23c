package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/kv"
)

// Store reads and writes API objects in the replicated store.
type Store struct {
	node      *raft.Node
	resources *Resources
	now       func() time.Time
	log       *slog.Logger
	// writeTimeout bounds a write's wait for the store (then 503/504).
	writeTimeout time.Duration
	serviceRange netip.Prefix
	secrets      ValueCipher
	compress     func() bool
	fields       *fieldManagers
	webhooks     atomic.Pointer[Webhooks]
	shared       shared // decoded changes for watchers
}

// Config configures a Store.
type Config struct {
	Node      *raft.Node // required
	Resources *Resources // default: NewResources(Table())
	// Now is the clock for timestamps. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// WriteTimeout bounds each write's wait for the store. Default 10s.
	WriteTimeout time.Duration
	// ServiceCIDR is the range of Service cluster IPs. Default 10.43.0.0/16.
	ServiceCIDR netip.Prefix
	// Secrets, if set, encrypts the Secrets as they are stored and
	// decrypts them as they are read.
	Secrets ValueCipher
	// Compress reports whether values may be stored compressed: once
	// every store member reads them (during a rolling upgrade, a server
	// of an older release would not). Nil: always. Compressed values are
	// read whatever it says.
	Compress func() bool
}

// ValueCipher encrypts stored values (AEAD), bound to their key: a value
// moved to another key does not open. Open takes values stored before
// there was a cipher as they are.
type ValueCipher interface {
	Seal(key string, plain []byte) ([]byte, error)
	Open(key string, stored []byte) ([]byte, error)
}

// SecretsPrefix is where the Secrets are stored.
const SecretsPrefix = "/registry/core/secrets/"

// New returns a Store.
func New(cfg Config) *Store {
	if cfg.Resources == nil {
		cfg.Resources = NewResources(Table())
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if !cfg.ServiceCIDR.IsValid() {
		cfg.ServiceCIDR = DefaultServiceCIDR
	}
	return &Store{node: cfg.Node, resources: cfg.Resources, now: cfg.Now, log: cfg.Logger,
		writeTimeout: cfg.WriteTimeout, serviceRange: cfg.ServiceCIDR.Masked(), secrets: cfg.Secrets,
		compress: cfg.Compress, fields: &fieldManagers{resources: cfg.Resources}}
}

// Resources returns the served resources.
func (s *Store) Resources() *Resources { return s.resources }

// Node returns the store member this Store writes through.
func (s *Store) Node() *raft.Node { return s.node }

// keyPrefix is where the objects of r in namespace ns live ("" = all).
func keyPrefix(r *Resource, ns string) string {
	p := "/registry/" + r.storageGroupResource() + "/"
	if r.Namespaced && ns != "" {
		p += ns + "/"
	}
	return p
}

func objectKey(r *Resource, ns, name string) string {
	return keyPrefix(r, ns) + name
}

// storageResource is the resource whose version objects of r are stored in.
func (s *Store) storageResource(r *Resource) *Resource {
	if r.StorageVersion == "" {
		return r
	}
	group := r.Group
	if r.StorageGroup != "" {
		group = strings.TrimPrefix(r.StorageGroup, "core")
	}
	sr, ok := s.resources.Lookup(schema.GroupVersionResource{Group: group, Version: r.StorageVersion, Resource: r.Resource})
	if !ok {
		panic("registry: storage version " + r.StorageVersion + " of " + r.String() + " is not served")
	}
	return sr
}

// convert converts obj, an object of r or of its storage version, to the
// version of to.
func convert(r *Resource, obj runtime.Object, to *Resource) (runtime.Object, error) {
	if r.Convert == nil {
		return nil, fmt.Errorf("registry: no conversion of %s to %s", r.GVK(), to.GroupVersion())
	}
	return r.Convert(obj, to.GroupVersion())
}

// fromStore decodes a stored value as resource r, with its resourceVersion.
func (s *Store) fromStore(r *Resource, v kv.KeyValue) (runtime.Object, error) {
	return s.decode(r, v, scanConfig{})
}

// decode is fromStore as a Scan with cfg asked.
func (s *Store) decode(r *Resource, v kv.KeyValue, cfg scanConfig) (runtime.Object, error) {
	sr := s.storageResource(r)
	value, err := s.open(v.Key, v.Value)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("%s: %w", v.Key, err))
	}
	if cfg.noManagedFields {
		value = withoutManagedFields(value)
	}
	obj, err := decodeStored(sr, value)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("%s: %w", v.Key, err))
	}
	if obj.GetObjectKind().GroupVersionKind().GroupVersion() != r.GroupVersion() {
		if obj, err = convert(r, obj, r); err != nil {
			if _, ok := err.(apierrors.APIStatus); ok {
				return nil, err
			}
			return nil, apierrors.NewInternalError(err)
		}
	}
	if r.Read != nil {
		r.Read(obj)
	}
	m, _ := meta.Accessor(obj)
	m.SetResourceVersion(strconv.FormatInt(v.ModRevision, 10))
	return obj, nil
}

// open is the JSON of a stored value: decrypted if its key is encrypted,
// expanded if it was compressed.
func (s *Store) open(key string, value []byte) ([]byte, error) {
	if s.secrets != nil && strings.HasPrefix(key, SecretsPrefix) {
		v, err := s.secrets.Open(key, value)
		if err != nil {
			return nil, err
		}
		value = v
	}
	return StoredJSON(value)
}

// seal is the value to store under key for the JSON value: encrypted if
// its key is encrypted, else compressed. The size the store takes is the
// JSON's, as etcd's is the request's, however well it compresses.
func (s *Store) seal(key string, value []byte) ([]byte, error) {
	if len(key)+len(value) > MaxWriteBytes {
		return nil, tooLarge(len(key) + len(value))
	}
	if s.secrets == nil || !strings.HasPrefix(key, SecretsPrefix) {
		if s.compress != nil && !s.compress() {
			return value, nil
		}
		return compressValue(value), nil
	}
	v, err := s.secrets.Seal(key, value)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable("the Secrets' encryption key is not ready on this server: " + err.Error())
	}
	return v, nil
}

// toStore encodes an object of resource r in its storage version, without
// its resourceVersion (the store revision stands for it).
func (s *Store) toStore(r *Resource, obj runtime.Object) ([]byte, error) {
	sr := s.storageResource(r)
	if sr != r {
		var err error
		if obj, err = convert(r, obj, sr); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	} else {
		obj = obj.DeepCopyObject()
	}
	m, _ := meta.Accessor(obj)
	m.SetResourceVersion("")
	m.SetSelfLink("")
	return encode(sr, obj)
}

// readConsistency maps a request's resourceVersion to how fresh a read must be:
// "" is the latest (a linearizable read); "0" is whatever this member has.
func (s *Store) sync(ctx context.Context, resourceVersion string) error {
	if resourceVersion == "0" {
		return nil
	}
	if err := s.node.Sync(ctx); err != nil {
		return storeError(err)
	}
	return nil
}

// Get reads one object.
func (s *Store) Get(ctx context.Context, r *Resource, ns, name string, opts metav1.GetOptions) (runtime.Object, error) {
	if err := s.sync(ctx, opts.ResourceVersion); err != nil {
		return nil, err
	}
	v, ok, _ := s.node.KV().Get(objectKey(r, ns, name))
	if !ok {
		return nil, apierrors.NewNotFound(r.GroupVersionResource.GroupResource(), name)
	}
	return s.fromStore(r, v)
}

// storeError turns a raft error into the API's status error.
func storeError(err error) error {
	var se apierrors.APIStatus
	switch {
	case errors.As(err, &se):
		return err
	case errors.Is(err, raft.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return apierrors.NewTimeoutError("the store did not confirm the request in time; it may or may not have been applied", 1)
	case errors.Is(err, raft.ErrNoLeader), errors.Is(err, raft.ErrStopped):
		return apierrors.NewServiceUnavailable("the cluster store has no quorum; nothing was written: " + err.Error())
	case errors.Is(err, context.Canceled):
		return apierrors.NewServiceUnavailable("request canceled")
	}
	return apierrors.NewInternalError(err)
}
