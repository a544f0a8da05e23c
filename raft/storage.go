package raft

import (
	"fmt"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/isle-cluster/isle/raft/kv"
)

// logStorage is the in-memory log raft reads: etcd raft's MemoryStorage
// for the entries and the newest snapshot's metadata, and the state that
// snapshot was taken of, kept frozen (a copy-on-write clone of the store)
// instead of encoded. Encoded, it would be a second copy of the whole
// store in memory for as long as the snapshot is the newest; raft only
// asks for its data to send it to a member that lags behind the log, so
// it is encoded then. Owned by the Ready loop.
type logStorage struct {
	*etcdraft.MemoryStorage
	index   uint64     // the snapshot frozen and members describe
	frozen  *kv.Frozen // nil: no snapshot taken or installed yet
	members []byte     // the member table at index, as encodeSnapshot takes it
}

var _ etcdraft.Storage = (*logStorage)(nil)

func newLogStorage() *logStorage {
	return &logStorage{MemoryStorage: etcdraft.NewMemoryStorage()}
}

// Snapshot returns the newest snapshot with its data encoded now.
func (s *logStorage) Snapshot() (raftpb.Snapshot, error) {
	snap, err := s.MemoryStorage.Snapshot()
	if err != nil || s.frozen == nil || snap.Metadata.Index != s.index {
		return snap, err
	}
	kvData, err := s.frozen.Encode()
	if err != nil {
		return raftpb.Snapshot{}, fmt.Errorf("raft: encode snapshot %d: %w", s.index, err)
	}
	snap.Data = encodeSnapshot(s.members, kvData)
	return snap, nil
}

// createSnapshot makes the state frozen at index, with the member table
// members, the newest snapshot.
func (s *logStorage) createSnapshot(index uint64, cs *raftpb.ConfState, frozen *kv.Frozen, members []byte) error {
	if _, err := s.MemoryStorage.CreateSnapshot(index, cs, nil); err != nil {
		return err
	}
	s.index, s.frozen, s.members = index, frozen, members
	return nil
}

// applySnapshot replaces the log with snap, whose state the store was
// just restored from and is frozen as; snap's data is not kept.
func (s *logStorage) applySnapshot(snap raftpb.Snapshot, frozen *kv.Frozen, members []byte) error {
	snap.Data = nil
	if err := s.MemoryStorage.ApplySnapshot(snap); err != nil {
		return err
	}
	s.index, s.frozen, s.members = snap.Metadata.Index, frozen, members
	return nil
}
