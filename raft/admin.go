package raft

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Status is a member's view of the cluster.
type Status struct {
	ID            uint64 `json:"id"`
	ClusterID     uint64 `json:"clusterID"`
	Name          string `json:"name"`
	Role          string `json:"role"`
	Leader        uint64 `json:"leader"`
	Term          uint64 `json:"term"`
	Commit        uint64 `json:"commit"`
	Applied       uint64 `json:"applied"`
	SnapshotIndex uint64 `json:"snapshotIndex"`
	// LogBytes are the bytes of the entries the member holds in memory:
	// those since its snapshot and the catch-up entries behind it.
	LogBytes uint64         `json:"logBytes"`
	Revision int64          `json:"revision"`
	Members  []MemberStatus `json:"members"`
}

// MemberStatus is a member, whether this member has heard from it within
// an election timeout, and, on the leader, its replication progress.
type MemberStatus struct {
	Member
	Match  uint64 `json:"match,omitempty"`
	Active bool   `json:"active,omitempty"`
}

// Status reports this member's view of the cluster.
func (n *Node) Status(ctx context.Context) (Status, error) {
	return inLoop(ctx, n, func() Status {
		rs := n.rn.Status()
		st := Status{
			ID: n.id, ClusterID: n.clusterID, Name: n.cfg.Name,
			Role: roleName(rs), Leader: rs.Lead, Term: rs.Term, Commit: rs.Commit,
			Applied: n.applied, SnapshotIndex: n.snapIndex, Revision: n.kv.Revision(), LogBytes: n.logBytes(),
		}
		for _, m := range n.members.list() {
			ms := MemberStatus{Member: m}
			if pr, ok := rs.Progress[m.ID]; ok {
				ms.Match = pr.Match
			}
			ms.Active = n.active(m.ID)
			st.Members = append(st.Members, ms)
		}
		return st
	})
}

// logBytes are the bytes of the entries in the in-memory log.
func (n *Node) logBytes() uint64 {
	first, err := n.storage.FirstIndex()
	if err != nil {
		return 0
	}
	last, err := n.storage.LastIndex()
	if err != nil || last < first {
		return 0
	}
	ents, err := n.storage.Entries(first, last+1, math.MaxUint64)
	if err != nil {
		return 0
	}
	var size uint64
	for _, e := range ents {
		size += uint64(e.Size())
	}
	return size
}

func roleName(rs etcdraft.Status) string {
	if _, learner := rs.Config.Learners[rs.ID]; learner {
		return "learner"
	}
	switch rs.RaftState {
	case etcdraft.StateLeader:
		return "leader"
	case etcdraft.StateCandidate, etcdraft.StatePreCandidate:
		return "candidate"
	}
	return "follower"
}

// AddLearner adds a new member as a learner and returns what it needs to
// start (Bootstrap.Join). Call it on any member; it is replicated through
// the leader.
func (n *Node) AddLearner(ctx context.Context, m Member) (JoinInfo, error) {
	if m.Name == "" || m.RaftAddr == "" {
		return JoinInfo{}, fmt.Errorf("raft: add learner: %w: a member needs a name and a raft address", ErrRefused)
	}
	for _, cur := range n.Members() {
		if cur.Name == m.Name {
			return JoinInfo{}, fmt.Errorf("raft: add learner: %w: a member named %q exists already (ID %x); remove it first", ErrRefused, m.Name, cur.ID)
		}
	}
	m.ID = randomID()
	if err := n.changeMembers(ctx, raftpb.ConfChangeAddLearnerNode, m); err != nil {
		return JoinInfo{}, fmt.Errorf("raft: add learner %q: %w", m.Name, err)
	}
	return JoinInfo{ClusterID: n.clusterID, MemberID: m.ID, Members: n.Members()}, nil
}

// Promote makes a learner a voter. It is refused while the learner lags
// the leader by more than a tenth of the leader's log.
func (n *Node) Promote(ctx context.Context, id uint64) error {
	var m Member
	var found bool
	for _, cur := range n.Members() {
		if cur.ID == id {
			m, found = cur, true
		}
	}
	if !found {
		return fmt.Errorf("raft: promote %x: %w: no such member", id, ErrRefused)
	}
	if !m.Learner {
		return nil
	}
	if err := n.leaderCheck(ctx, func(rs etcdraft.Status) error {
		pr, ok := rs.Progress[id]
		if !ok {
			return fmt.Errorf("%w: the leader has no progress for %x yet", ErrRefused, id)
		}
		if lag := rs.Progress[rs.ID].Match - pr.Match; lag > rs.Progress[rs.ID].Match/10+100 {
			return fmt.Errorf("%w: the learner is %d entries behind; try again once it has caught up", ErrRefused, lag)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("raft: promote %x: %w", id, err)
	}
	if err := n.changeMembers(ctx, raftpb.ConfChangeAddNode, m); err != nil {
		return fmt.Errorf("raft: promote %x: %w", id, err)
	}
	return nil
}

// RemoveMember removes a member. It is refused if the voters left would not
// include a quorum of members the leader has heard from within an election
// timeout.
func (n *Node) RemoveMember(ctx context.Context, id uint64) error {
	if !n.memberChangeDone(raftpb.ConfChangeAddLearnerNode, id) {
		return fmt.Errorf("raft: remove %x: %w: no such member", id, ErrRefused)
	}
	if err := n.leaderCheck(ctx, func(rs etcdraft.Status) error {
		voters := rs.Config.Voters.IDs()
		if _, ok := voters[id]; !ok {
			return nil // a learner: no quorum at stake
		}
		left, active := 0, 0
		for v := range voters {
			if v == id {
				continue
			}
			left++
			if n.active(v) {
				active++
			}
		}
		if left == 0 {
			return fmt.Errorf("%w: it is the last voter", ErrRefused)
		}
		if active < left/2+1 {
			return fmt.Errorf("%w: only %d of the %d voters left are active, fewer than a quorum", ErrRefused, active, left)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("raft: remove %x: %w", id, err)
	}
	if err := n.changeMembers(ctx, raftpb.ConfChangeRemoveNode, Member{ID: id}); err != nil {
		return fmt.Errorf("raft: remove %x: %w", id, err)
	}
	return nil
}

// TransferLeader hands leadership to another voter and waits until it has
// taken over. Call it on the leader. Raft abandons a transfer that does not
// finish within an election timeout; it is asked again until ctx ends.
func (n *Node) TransferLeader(ctx context.Context, to uint64) error {
	for {
		err := n.leaderCheck(ctx, func(rs etcdraft.Status) error {
			if _, ok := rs.Config.Voters.IDs()[to]; !ok {
				return fmt.Errorf("%w: %x is not a voter", ErrRefused, to)
			}
			if rs.LeadTransferee != to {
				n.rn.TransferLeader(to)
			}
			return nil
		})
		switch {
		case n.Leader() == to:
			return nil
		case err != nil && !(errors.Is(err, ErrRefused) && n.Leader() != n.id):
			return fmt.Errorf("raft: transfer leadership to %x: %w", to, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("raft: transfer leadership to %x: %w", to, ctx.Err())
		case <-n.donec:
			return n.doneErr()
		case <-time.After(n.cfg.TickInterval * time.Duration(n.cfg.ElectionTicks)):
		}
		if n.Leader() == to {
			return nil
		}
	}
}

// HandOff, on the leader, hands leadership to the active voter whose log
// is furthest along and waits until it has taken over: a member about to
// stop (an upgrade, a shutdown) then costs the cluster no election
// timeout. It does nothing on a follower, or when no other voter is
// active.
func (n *Node) HandOff(ctx context.Context) error {
	var to uint64
	err := n.leaderCheck(ctx, func(rs etcdraft.Status) error {
		var best uint64
		for id := range rs.Config.Voters.IDs() {
			if pr, ok := rs.Progress[id]; ok && id != n.id && n.active(id) && (to == 0 || pr.Match > best) {
				to, best = id, pr.Match
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, ErrRefused) || err == nil && to == 0:
		return nil // not the leader, or nobody to hand to
	case err != nil:
		return fmt.Errorf("raft: hand off leadership: %w", err)
	}
	return n.TransferLeader(ctx, to)
}

// leaderCheck runs check against the leader's status in the Ready loop; it
// fails if this member is not the leader.
func (n *Node) leaderCheck(ctx context.Context, check func(etcdraft.Status) error) error {
	err, lerr := inLoop(ctx, n, func() error {
		rs := n.rn.Status()
		if rs.RaftState != etcdraft.StateLeader {
			return fmt.Errorf("%w: this member is not the leader (leader: %x)", ErrRefused, rs.Lead)
		}
		return check(rs)
	})
	if lerr != nil {
		return lerr
	}
	return err
}

// changeMembers proposes one membership change and waits until the member
// table shows it. Raft silently replaces a conf change proposed while
// another is pending with an empty entry, so an attempt that is not seen
// applied within two election timeouts is proposed again; a repeat that
// finds the change already made is refused by the table and ignored here.
func (n *Node) changeMembers(ctx context.Context, typ raftpb.ConfChangeType, m Member) error {
	attempt := max(2*time.Duration(n.cfg.ElectionTicks)*n.cfg.TickInterval, time.Second)
	for {
		reqID := randomID()
		cctx, err := json.Marshal(confContext{ReqID: reqID, Member: m})
		if err != nil {
			return err
		}
		cc := &raftpb.ConfChangeV2{
			Changes: []raftpb.ConfChangeSingle{{Type: typ, NodeID: m.ID}},
			Context: cctx,
		}
		actx, cancel := context.WithTimeout(ctx, attempt)
		_, err = n.wait(actx, &proposal{id: reqID, cc: cc, done: make(chan proposalResult, 1), start: time.Now()})
		cancel()
		if err == nil || n.memberChangeDone(typ, m.ID) {
			return nil
		}
		if ctx.Err() != nil || errors.Is(err, ErrRefused) || errors.Is(err, ErrStopped) {
			return err
		}
	}
}

// memberChangeDone reports whether the applied member table already shows
// the change.
func (n *Node) memberChangeDone(typ raftpb.ConfChangeType, id uint64) bool {
	var cur *Member
	for _, m := range n.Members() {
		if m.ID == id {
			cur = &m
		}
	}
	switch typ {
	case raftpb.ConfChangeAddLearnerNode:
		return cur != nil
	case raftpb.ConfChangeAddNode:
		return cur != nil && !cur.Learner
	case raftpb.ConfChangeRemoveNode:
		return cur == nil
	}
	return false
}
