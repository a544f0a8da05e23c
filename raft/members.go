package raft

import (
	"encoding/json"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
)

// Member is one member of the store as every member knows it: replicated
// through conf-change entries and kept in snapshots.
type Member struct {
	ID         uint64 `json:"id"`
	Name       string `json:"name"`
	RaftAddr   string `json:"raftAddr"`
	ClientAddr string `json:"clientAddr,omitempty"` // where clients reach this member (isle: its API server)
	Learner    bool   `json:"learner,omitempty"`
}

// confContext travels in a conf change's Context: the member it concerns
// and the ID of the request waiting for it.
type confContext struct {
	ReqID  uint64 `json:"req"`
	Member Member `json:"member"`
}

// membership is the replicated member table. It changes only when a
// conf-change entry is applied, so it is the same on every member at the
// same index.
type membership struct {
	members map[uint64]Member
	removed map[uint64]bool
}

func newMembership() *membership {
	return &membership{members: map[uint64]Member{}, removed: map[uint64]bool{}}
}

// apply decides a conf change against the table and updates it. Changes it
// refuses get their NodeID zeroed, which raft then ignores, so every member
// reaches the same decision from the same table. It returns the refusal
// reason, if any.
func (ms *membership) apply(cc *raftpb.ConfChangeV2, m Member) string {
	var refused string
	for i := range cc.Changes {
		ch := &cc.Changes[i]
		id := ch.NodeID
		cur, exists := ms.members[id]
		switch {
		case ms.removed[id]:
			refused = fmt.Sprintf("member %x was removed and its ID cannot be reused", id)
		case ch.Type == raftpb.ConfChangeAddLearnerNode && exists:
			refused = fmt.Sprintf("member %x already exists", id)
		case ch.Type == raftpb.ConfChangeAddLearnerNode:
			m.ID, m.Learner = id, true
			ms.members[id] = m
			continue
		case ch.Type == raftpb.ConfChangeAddNode && exists && !cur.Learner:
			refused = fmt.Sprintf("member %x is already a voter", id)
		case ch.Type == raftpb.ConfChangeAddNode && exists:
			cur.Learner = false
			ms.members[id] = cur
			continue
		case ch.Type == raftpb.ConfChangeAddNode:
			m.ID, m.Learner = id, false
			ms.members[id] = m
			continue
		case ch.Type == raftpb.ConfChangeRemoveNode && !exists:
			refused = fmt.Sprintf("member %x does not exist", id)
		case ch.Type == raftpb.ConfChangeRemoveNode:
			delete(ms.members, id)
			ms.removed[id] = true
			continue
		default:
			refused = fmt.Sprintf("conf change type %v is not supported", ch.Type)
		}
		ch.NodeID = 0
	}
	return refused
}

// list returns the members sorted by ID.
func (ms *membership) list() []Member {
	out := make([]Member, 0, len(ms.members))
	for _, m := range ms.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

type membershipJSON struct {
	Members []Member `json:"members"`
	Removed []uint64 `json:"removed,omitempty"`
}

func (ms *membership) marshal() ([]byte, error) {
	removed := make([]uint64, 0, len(ms.removed))
	for id := range ms.removed {
		removed = append(removed, id)
	}
	slices.Sort(removed)
	return json.Marshal(membershipJSON{Members: ms.list(), Removed: removed})
}

func unmarshalMembership(b []byte) (*membership, error) {
	var j membershipJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("decode member table: %w", err)
	}
	ms := newMembership()
	for _, m := range j.Members {
		if m.ID == 0 {
			return nil, fmt.Errorf("decode member table: member %q has ID 0", m.Name)
		}
		ms.members[m.ID] = m
	}
	for _, id := range j.Removed {
		ms.removed[id] = true
	}
	return ms, nil
}
