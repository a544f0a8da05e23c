package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/control/controllers/nodelifecycle"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft"
)

const membersPath = wire.MembersPath

// voters is how many servers vote in the store; further servers are
// standbys (raft learners) that take a removed voter's place.
const voters = 3

// Boards is what the control plane learns of the boards from outside the
// store (their gossip, which the board's assembly adapts to it): every
// board that is or was in the cluster, and how it answers.
type Boards interface {
	nodelifecycle.Liveness
	// Members are the boards as `isle member list` shows them, less what
	// the store knows (RaftID, Raft); State is a nodelifecycle.BoardState.
	Members() []wire.MemberInfo
	// Forget drops what is known of a removed board.
	Forget(name string)
}

// membership joins the two views of the boards: the gossip (every board,
// alive or not) and the store's members (servers).
type membership struct {
	node   *raft.Node
	boards Boards
	store  *registry.Store
	log    *slog.Logger
	// removeDeadAfter removes a voter whose board has been dead this long
	// (0: never; an administrator removes it).
	removeDeadAfter time.Duration
}

func (m *membership) list() []wire.MemberInfo {
	byName := map[string]*wire.MemberInfo{}
	var out []*wire.MemberInfo
	for _, b := range m.boards.Members() {
		mi := &b
		byName[b.Name] = mi
		out = append(out, mi)
	}
	lead := m.node.Leader()
	for _, r := range m.node.Members() {
		mi, ok := byName[r.Name]
		if !ok {
			mi = &wire.MemberInfo{Name: r.Name, Role: wire.RoleServer}
			out = append(out, mi)
		}
		mi.RaftID = fmt.Sprintf("%x", r.ID)
		switch {
		case r.ID == lead:
			mi.Raft = "leader"
		case r.Learner:
			mi.Raft = "learner"
		default:
			mi.Raft = "voter"
		}
	}
	slices.SortFunc(out, func(a, b *wire.MemberInfo) int { return compareStrings(a.Name, b.Name) })
	res := make([]wire.MemberInfo, len(out))
	for i, mi := range out {
		res[i] = *mi
	}
	return res
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (m *membership) serveRemove(ctx context.Context, w http.ResponseWriter, name string) {
	err := m.remove(ctx, name)
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, errNoSuchBoard):
		httpError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, raft.ErrRefused):
		httpError(w, http.StatusConflict, err.Error())
	default:
		httpError(w, http.StatusServiceUnavailable, err.Error())
	}
}

var errNoSuchBoard = errors.New("no such board")

// remove takes a board out of the cluster: its store membership (refused
// when that would lose the quorum), its credential (so its name is free),
// its Node object, and what gossip remembers of it.
func (m *membership) remove(ctx context.Context, name string) error {
	found := false
	for _, r := range m.node.Members() {
		if r.Name == name {
			if err := m.node.RemoveMember(ctx, r.ID); err != nil {
				return fmt.Errorf("remove %s: %w", name, err)
			}
			found = true
		}
	}
	if _, ok, _ := m.node.KV().Get(nodeNamePrefix + name); ok {
		found = true
		if err := forgetNode(ctx, m.node, name); err != nil {
			return fmt.Errorf("remove %s: %w", name, err)
		}
	}
	nodes, _ := m.store.Resources().Lookup(schema.GroupVersionResource{Version: "v1", Resource: "nodes"})
	if _, _, err := m.store.Delete(ctx, nodes, "", name, metav1.DeleteOptions{}); err == nil {
		found = true
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove %s: delete its Node: %w", name, err)
	}
	for _, b := range m.boards.Boards() {
		if b.Name == name {
			found = true
		}
	}
	m.boards.Forget(name)
	if !found {
		return fmt.Errorf("remove %s: %w", name, errNoSuchBoard)
	}
	m.log.Info("cluster: board removed", "name", name)
	return nil
}

// maintain runs on the leader: it keeps three voters by promoting standby
// servers that have caught up, and, when asked to, removes voters whose
// boards have been dead too long; it keeps the kubernetes Service's
// endpoints.
func (m *membership) maintain(ctx context.Context) {
	var eps []string // the kubernetes Service's endpoints last logged
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if m.removeDeadAfter > 0 {
			m.removeDead(ctx)
		}
		m.promoteStandby(ctx)
		m.syncAPIEndpoints(ctx, &eps)
	}
}

func (m *membership) promoteStandby(ctx context.Context) {
	members := m.node.Members()
	n := 0
	for _, r := range members {
		if !r.Learner {
			n++
		}
	}
	if n >= voters {
		return
	}
	alive := map[string]bool{}
	for _, b := range m.boards.Boards() {
		alive[b.Name] = b.State == nodelifecycle.BoardAlive
	}
	for _, r := range members {
		if !r.Learner || !alive[r.Name] {
			continue
		}
		if err := m.node.Promote(ctx, r.ID); err != nil {
			m.log.Debug("cluster: standby not promoted yet", "name", r.Name, "err", err)
			continue
		}
		m.log.Info("cluster: standby server promoted to voter", "name", r.Name, "voters", n+1)
		return
	}
}

func (m *membership) removeDead(ctx context.Context) {
	dead := map[string]time.Time{}
	for _, b := range m.boards.Members() {
		if nodelifecycle.BoardState(b.State) == nodelifecycle.BoardDead {
			dead[b.Name] = b.Since
		}
	}
	for _, r := range m.node.Members() {
		since, ok := dead[r.Name]
		if !ok || r.ID == m.node.ID() || time.Since(since) < m.removeDeadAfter {
			continue
		}
		if err := m.node.RemoveMember(ctx, r.ID); err != nil {
			m.log.Warn("cluster: dead server not removed", "name", r.Name, "dead for", time.Since(since).Round(time.Second), "err", err)
			continue
		}
		m.log.Warn("cluster: dead server removed from the store", "name", r.Name, "dead for", time.Since(since).Round(time.Second))
	}
}

// nodeLeaseSeconds is the duration the made-up node Leases claim: the
// time Kubernetes gives a kubelet before its Node is NotReady.
const nodeLeaseSeconds = 40

// nodeLease makes up the Lease of a Node's board from gossip: renewed now
// while the board is alive (SWIM probes it every second), at the time it
// stopped answering otherwise. Nothing of it is stored.
func (m *membership) nodeLease(node string) (*coordinationv1.Lease, bool) {
	for _, b := range m.boards.Members() {
		if b.Name != node {
			continue
		}
		renew := metav1.NewMicroTime(time.Now())
		if st := nodelifecycle.BoardState(b.State); st == nodelifecycle.BoardDead || st == nodelifecycle.BoardLeft {
			renew = metav1.NewMicroTime(b.Since)
		}
		return &coordinationv1.Lease{
			TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: corev1.NamespaceNodeLease, CreationTimestamp: metav1.NewTime(b.Since)},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &b.Name, LeaseDurationSeconds: ptrTo(int32(nodeLeaseSeconds)),
				RenewTime: &renew},
		}, true
	}
	return nil, false
}

func ptrTo[T any](v T) *T { return &v }
