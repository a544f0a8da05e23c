package raft

import (
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

func TestMembershipDecisions(t *testing.T) {
	change := func(typ raftpb.ConfChangeType, id uint64) *raftpb.ConfChangeV2 {
		return &raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: typ, NodeID: id}}}
	}
	ms := newMembership()
	steps := []struct {
		name    string
		cc      *raftpb.ConfChangeV2
		refused string // substring; "" = accepted
	}{
		{"add a learner", change(raftpb.ConfChangeAddLearnerNode, 7), ""},
		{"add it again", change(raftpb.ConfChangeAddLearnerNode, 7), "already exists"},
		{"promote it", change(raftpb.ConfChangeAddNode, 7), ""},
		{"promote a voter", change(raftpb.ConfChangeAddNode, 7), "already a voter"},
		{"remove it", change(raftpb.ConfChangeRemoveNode, 7), ""},
		{"remove it again", change(raftpb.ConfChangeRemoveNode, 7), "was removed"},
		{"reuse its ID as a learner", change(raftpb.ConfChangeAddLearnerNode, 7), "cannot be reused"},
		{"reuse its ID as a voter", change(raftpb.ConfChangeAddNode, 7), "cannot be reused"},
		{"remove a stranger", change(raftpb.ConfChangeRemoveNode, 9), "does not exist"},
	}
	for _, st := range steps {
		got := ms.apply(st.cc, Member{Name: "m", RaftAddr: "a"})
		switch {
		case st.refused == "" && got != "":
			t.Fatalf("%s: refused (%s), want accepted", st.name, got)
		case st.refused != "" && !strings.Contains(got, st.refused):
			t.Fatalf("%s: got %q, want a refusal mentioning %q", st.name, got, st.refused)
		case st.refused != "" && st.cc.Changes[0].NodeID != 0:
			t.Fatalf("%s: a refused change must reach raft with node ID 0 (a no-op)", st.name)
		}
	}
	b, err := ms.marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := unmarshalMembership(b)
	if err != nil || !back.removed[7] || len(back.members) != 0 {
		t.Fatalf("round trip lost the removed ID: %+v %v", back, err)
	}
}
