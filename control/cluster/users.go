package cluster

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/isle-cluster/isle/control/authz"
	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/kv"
)

// People's accounts (`isle user`): a client certificate of the cluster CA
// for the user name and groups, a binding of one of the user-facing roles
// in a namespace, and a record under usersPrefix. Revoking a user deletes
// the record and the binding and lists the certificate's serial under
// revokedPrefix until it expires: the API server refuses a revoked
// certificate (kube-apiserver has no way to revoke one).
const (
	// UsersPath is the admin socket's: GET lists, POST adds,
	// DELETE UsersPath/NAME revokes.
	UsersPath     = "/users"
	usersPrefix   = "/isle/users/"
	revokedPrefix = "/isle/revoked-certs/"
	// userBindingPrefix names the RoleBinding (or ClusterRoleBinding)
	// isle user add makes.
	userBindingPrefix = "isle-user-"
	defaultUserTTL    = 90 * 24 * time.Hour
	maxUserTTL        = 5 * 365 * 24 * time.Hour
	maxUserGroups     = 20
	maxUsers          = 10000
)

// userRecord is what the store keeps of a user.
type userRecord struct {
	wire.UserInfo
	// Binding is the binding made for the user ("" for none), in
	// Namespace (a ClusterRoleBinding when Namespace is "").
	Binding string `json:"binding,omitempty"`
}

type revokedCert struct {
	User     string    `json:"user"`
	NotAfter time.Time `json:"notAfter"`
}

// users adds, lists and revokes users.
type users struct {
	node   *raft.Node
	store  *registry.Store
	id     *Identity
	server func() string // the API server URL kubeconfigs name
	log    *slog.Logger
	now    func() time.Time
}

// userName is what isle user add accepts as a name: letters, digits and
// ".-_@", starting with a letter or digit, not system: (Kubernetes' own).
var userName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.@_-]{0,127}$`)

// checkUserRequest validates an add request and fills in its defaults.
func checkUserRequest(req *wire.UserRequest) (time.Duration, error) {
	if !userName.MatchString(req.Name) {
		return 0, fmt.Errorf("name %q: want 1 to 128 of letters, digits and .@_- starting with a letter or digit", req.Name)
	}
	if len(req.Groups) > maxUserGroups {
		return 0, fmt.Errorf("groups: at most %d", maxUserGroups)
	}
	for _, g := range req.Groups {
		if g == "" || len(g) > 128 || strings.ContainsAny(g, "\n\r\t,") {
			return 0, fmt.Errorf("group %q: want 1 to 128 characters, no commas or line breaks", g)
		}
		if strings.HasPrefix(g, "system:") && g != authz.GroupMasters {
			return 0, fmt.Errorf("group %q: the system: groups are Kubernetes' own (system:masters, for an administrator, is the one allowed)", g)
		}
	}
	switch req.Role {
	case "", "admin", "edit", "view":
	default:
		return 0, fmt.Errorf("role %q: want admin, edit or view", req.Role)
	}
	if req.Namespace != "" {
		if errs := validation.IsDNS1123Label(req.Namespace); len(errs) > 0 {
			return 0, fmt.Errorf("namespace %q: %s", req.Namespace, strings.Join(errs, "; "))
		}
		if req.Role == "" {
			req.Role = "admin"
		}
	}
	ttl := defaultUserTTL
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil || d < time.Minute || d > maxUserTTL {
			return 0, fmt.Errorf("ttl %q: want a duration from 1m to %v (e.g. 2160h)", req.TTL, maxUserTTL)
		}
		ttl = d
	}
	return ttl, nil
}

// add makes a user: its binding, its certificate and its record; the
// answer holds its kubeconfig.
func (u *users) add(ctx context.Context, req wire.UserRequest) (*wire.UserAdded, int, error) {
	ttl, err := checkUserRequest(&req)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	if _, found, _ := u.node.KV().Get(usersPrefix + req.Name); found {
		return nil, http.StatusConflict, fmt.Errorf("user %q exists: revoke it first (isle user revoke %s)", req.Name, req.Name)
	}
	if n := len(u.list()); n >= maxUsers {
		return nil, http.StatusConflict, fmt.Errorf("%d users: revoke some first", n)
	}
	now := u.now()
	certPEM, keyPEM, err := u.id.CA.IssueClientFor(req.Name, req.Groups, now, ttl)
	if err != nil {
		return nil, http.StatusServiceUnavailable, err
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, http.StatusInternalServerError, fmt.Errorf("user %s: %w", req.Name, err)
	}
	rec := userRecord{UserInfo: wire.UserInfo{Name: req.Name, Groups: req.Groups, Namespace: req.Namespace, Role: req.Role,
		Serial: cert.SerialNumber.Text(16), NotAfter: cert.NotAfter, Created: now.UTC().Truncate(time.Second)}}
	if req.Role != "" {
		rec.Binding = userBindingPrefix + req.Name
		if err := u.bind(ctx, rec); err != nil {
			return nil, http.StatusServiceUnavailable, err
		}
	}
	b, _ := json.Marshal(rec)
	res, err := u.node.Propose(ctx, kv.Op{Type: kv.OpPut, Key: usersPrefix + req.Name, Value: b, IfModRev: 0})
	if err != nil {
		return nil, http.StatusServiceUnavailable, fmt.Errorf("user %s: %w", req.Name, err)
	}
	if !res.Succeeded {
		return nil, http.StatusConflict, fmt.Errorf("user %q was added meanwhile", req.Name)
	}
	kc, err := pki.KubeconfigIn("isle", u.server(), u.id.CA.CertPEM(), req.Name, certPEM, keyPEM, "", req.Namespace)
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	u.log.Info("cluster: user added", "user", req.Name, "groups", req.Groups, "namespace", req.Namespace, "role", req.Role, "expires", cert.NotAfter)
	return &wire.UserAdded{User: rec.UserInfo, Kubeconfig: kc}, http.StatusCreated, nil
}

// bind makes the user's binding, and its namespace if it has none yet.
func (u *users) bind(ctx context.Context, rec userRecord) error {
	meta := metav1.ObjectMeta{Name: rec.Binding, Namespace: rec.Namespace, Labels: map[string]string{"isle.dev/user": rec.Name}}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: rec.Name}}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rec.Role}
	res, obj := u.resource(rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings")), runtime.Object(&rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects})
	if rec.Namespace != "" {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rec.Namespace}}
		_, err := u.store.Create(ctx, u.resource(corev1.SchemeGroupVersion.WithResource("namespaces")), "", ns, registry.WriteOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("user %s: namespace %s: %w", rec.Name, rec.Namespace, err)
		}
		res, obj = u.resource(rbacv1.SchemeGroupVersion.WithResource("rolebindings")), &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects}
	}
	_, err := u.store.Create(ctx, res, rec.Namespace, obj, registry.WriteOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = nil // left by an earlier user of the name, whose revocation could not delete it
	}
	if err != nil {
		return fmt.Errorf("user %s: binding: %w", rec.Name, err)
	}
	return nil
}

func (u *users) resource(gvr schema.GroupVersionResource) *registry.Resource {
	r, _ := u.store.Resources().Lookup(gvr)
	return r
}

// list is the users, by name.
func (u *users) list() []wire.UserInfo {
	var out []wire.UserInfo
	kvs, _, _ := u.node.KV().List(usersPrefix, "", 0)
	for _, v := range kvs {
		var rec userRecord
		if json.Unmarshal(v.Value, &rec) == nil {
			out = append(out, rec.UserInfo)
		}
	}
	slices.SortFunc(out, func(a, b wire.UserInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// revoke deletes the user's record and binding and revokes its
// certificate.
func (u *users) revoke(ctx context.Context, name string) (bool, error) {
	v, found, _ := u.node.KV().Get(usersPrefix + name)
	if !found {
		return false, nil
	}
	var rec userRecord
	if err := json.Unmarshal(v.Value, &rec); err != nil {
		return false, fmt.Errorf("user %s: the record is damaged: %w", name, err)
	}
	rc, _ := json.Marshal(revokedCert{User: name, NotAfter: rec.NotAfter})
	if _, err := u.node.Propose(ctx,
		kv.Op{Type: kv.OpDelete, Key: usersPrefix + name, IfModRev: v.ModRevision},
		kv.Op{Type: kv.OpPut, Key: revokedPrefix + rec.Serial, Value: rc, IfModRev: -1}); err != nil {
		return false, fmt.Errorf("revoke user %s: %w", name, err)
	}
	if rec.Binding != "" {
		res := u.resource(rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"))
		if rec.Namespace != "" {
			res = u.resource(rbacv1.SchemeGroupVersion.WithResource("rolebindings"))
		}
		if _, _, err := u.store.Delete(ctx, res, rec.Namespace, rec.Binding, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return true, fmt.Errorf("user %s revoked; its binding %s stays: %w", name, rec.Binding, err)
		}
	}
	u.log.Info("cluster: user revoked", "user", name, "serial", rec.Serial)
	u.forgetExpired(ctx)
	return true, nil
}

// forgetExpired drops the revoked certificates that have expired: the CA
// refuses them anyway.
func (u *users) forgetExpired(ctx context.Context) {
	kvs, _, _ := u.node.KV().List(revokedPrefix, "", 0)
	var ops []kv.Op
	for _, v := range kvs {
		var rc revokedCert
		if json.Unmarshal(v.Value, &rc) == nil && rc.NotAfter.Before(u.now()) {
			ops = append(ops, kv.Op{Type: kv.OpDelete, Key: v.Key, IfModRev: v.ModRevision})
		}
	}
	if len(ops) == 0 {
		return
	}
	if _, err := u.node.Propose(ctx, ops...); err != nil {
		u.log.Warn("cluster: forget expired revoked certificates", "err", err)
	}
}

// revoked reports whether the client certificate with serial (hex) was
// revoked.
func revoked(store *kv.Store, serial string) bool {
	_, found, _ := store.Get(revokedPrefix + serial)
	return found
}

func (u *users) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+UsersPath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, u.list())
	})
	mux.HandleFunc("POST "+UsersPath, func(w http.ResponseWriter, r *http.Request) {
		var req wire.UserRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			httpError(w, http.StatusBadRequest, "the request: "+err.Error())
			return
		}
		added, code, err := u.add(r.Context(), req)
		if err != nil {
			httpError(w, code, err.Error())
			return
		}
		writeJSON(w, code, added)
	})
	mux.HandleFunc("DELETE "+UsersPath+"/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		found, err := u.revoke(r.Context(), name)
		switch {
		case err != nil:
			httpError(w, http.StatusServiceUnavailable, err.Error())
		case !found:
			httpError(w, http.StatusNotFound, fmt.Sprintf("no user %q (isle user list shows them)", name))
		default:
			writeJSON(w, http.StatusOK, map[string]string{"revoked": name})
		}
	})
	return mux
}
