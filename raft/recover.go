package raft

import (
	"context"
	"fmt"
	"path/filepath"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/isle-cluster/isle/raft/kv"
	"github.com/isle-cluster/isle/raft/wal"
)

// Backup is the store's state at one revision, taken while it runs.
type Backup struct {
	ClusterID uint64
	MemberID  uint64   // the member that took it
	Index     uint64   // the applied index it reflects
	Revision  int64    // the store revision it holds
	Members   []Member // the member table at Index
	// KV is the key/value state, as a kv snapshot (Bootstrap.Seed takes
	// it).
	KV []byte
}

// Backup returns the store's state at one revision that reflects every
// write acknowledged before the call (a linearizable read, so a follower
// takes it as well as the leader). Freezing the state is cheap and the
// encoding runs on the caller's goroutine: the store goes on meanwhile.
func (n *Node) Backup(ctx context.Context) (Backup, error) {
	if err := n.Sync(ctx); err != nil {
		return Backup{}, fmt.Errorf("raft: backup: %w", err)
	}
	type frozen struct {
		kv      *kv.Frozen
		index   uint64
		members []Member
	}
	f, err := inLoop(ctx, n, func() frozen { return frozen{n.kv.Freeze(), n.applied, n.members.list()} })
	if err != nil {
		return Backup{}, fmt.Errorf("raft: backup: %w", err)
	}
	data, err := f.kv.Encode()
	if err != nil {
		return Backup{}, fmt.Errorf("raft: backup: %w", err)
	}
	return Backup{ClusterID: n.clusterID, MemberID: n.id, Index: f.index, Revision: f.kv.Revision(),
		Members: f.members, KV: data}, nil
}

// InUse reports whether a running member holds dataDir (its WAL is locked).
func InUse(dataDir string) (bool, error) {
	used, err := wal.InUse(filepath.Join(dataDir, "wal"))
	if err != nil {
		return false, fmt.Errorf("raft: %w", err)
	}
	return used, nil
}

// seed makes this new member the only voter of a new cluster whose state
// is kvData: a first snapshot (index 1, term 1) holds the member table and
// the state, the WAL records it, and the member file written last marks
// the member complete. The WAL is empty: Open removed any leftovers.
func (n *Node) seed(kvData []byte, mf memberFile) error {
	if err := n.kv.Restore(kvData); err != nil {
		return fmt.Errorf("raft: open: seed: %w", err)
	}
	self := Member{ID: n.id, Name: n.cfg.Name, RaftAddr: n.cfg.RaftAddr, ClientAddr: n.cfg.ClientAddr}
	if err := n.writeSoleVoter(self, nil, kvData, 1, 1, raftpb.HardState{Term: 1, Commit: 1}, nil); err != nil {
		return fmt.Errorf("raft: open: seed: %w", err)
	}
	return saveMemberFile(n.cfg.DataDir, mf)
}

// forceNewCluster makes this restarted member the only voter of a new
// cluster with what it had committed (etcd's --force-new-cluster): the
// committed entries after its snapshot are applied, a snapshot at the
// commit index holds the state and a member table of this member alone
// (every other member removed), and an empty entry of a new term after it
// drops the entries it had not seen committed. The cluster ID changes so
// that a lost member that comes back is refused by the transport instead
// of disturbing the new cluster.
func (n *Node) forceNewCluster(st *wal.State, mf memberFile) error {
	commit := max(st.HardState.Commit, n.snapIndex)
	for i := range st.Entries {
		e := &st.Entries[i]
		if e.Index <= n.snapIndex || e.Index > commit {
			continue
		}
		switch e.Type {
		case raftpb.EntryNormal:
			if len(e.Data) > 0 {
				n.kv.Apply(e.Data)
			}
		case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
			cc, cctx, err := n.decodeConfChange(e)
			if err != nil {
				return fmt.Errorf("raft: open: force a new cluster: %w", err)
			}
			n.members.apply(&cc, cctx.Member)
		}
	}
	self, ok := n.members.members[n.id]
	if !ok {
		return fmt.Errorf("raft: open: force a new cluster: member %x is not in its own member table (it was removed); it cannot be recovered", n.id)
	}
	self.Learner = false
	removed := make([]uint64, 0, len(n.members.members)+len(n.members.removed))
	for id := range n.members.members {
		if id != n.id {
			removed = append(removed, id)
		}
	}
	for id := range n.members.removed {
		removed = append(removed, id)
	}
	term, err := n.storage.Term(commit)
	if err != nil {
		return fmt.Errorf("raft: open: force a new cluster: term of index %d: %w", commit, err)
	}
	kvData, err := n.kv.Snapshot()
	if err != nil {
		return fmt.Errorf("raft: open: force a new cluster: %w", err)
	}
	newTerm := st.HardState.Term + 1
	hs := raftpb.HardState{Term: newTerm, Commit: commit}
	drop := []raftpb.Entry{{Index: commit + 1, Term: newTerm, Type: raftpb.EntryNormal}}
	n.storage = newLogStorage()
	if err := n.writeSoleVoter(self, removed, kvData, commit, term, hs, drop); err != nil {
		return fmt.Errorf("raft: open: force a new cluster: %w", err)
	}
	oldCluster := mf.ClusterID
	mf.ClusterID, mf.Forced = randomID(), true
	if err := saveMemberFile(n.cfg.DataDir, mf); err != nil {
		return err
	}
	n.clusterID = mf.ClusterID
	n.log.Warn("raft: forced a new cluster with this member as its only voter",
		"old-cluster", fmt.Sprintf("%x", oldCluster), "cluster", fmt.Sprintf("%x", mf.ClusterID),
		"index", commit, "removed", len(removed), "dropped-uncommitted", len(st.Entries) > 0 && st.Entries[len(st.Entries)-1].Index > commit)
	return nil
}

// writeSoleVoter writes a snapshot at index/term holding self as the one
// voter and kvData, records it and hs (and ents) in the WAL, and installs
// the result in memory.
func (n *Node) writeSoleVoter(self Member, removed []uint64, kvData []byte, index, term uint64, hs raftpb.HardState, ents []raftpb.Entry) error {
	ms := newMembership()
	ms.members[self.ID] = self
	for _, id := range removed {
		ms.removed[id] = true
	}
	mj, err := ms.marshal()
	if err != nil {
		return err
	}
	s := raftpb.Snapshot{Data: encodeSnapshot(mj, kvData), Metadata: raftpb.SnapshotMetadata{
		Index: index, Term: term, ConfState: raftpb.ConfState{Voters: []uint64{self.ID}}}}
	if err := n.snaps.Save(s); err != nil {
		return err
	}
	if err := n.wal.SaveSnapshot(s.Metadata); err != nil {
		return err
	}
	if err := n.wal.Save(hs, ents, true); err != nil {
		return err
	}
	return n.restore(&wal.State{HardState: hs, Snapshot: s.Metadata, Entries: ents})
}
