package transport

import (
	"bytes"
	"context"
	"errors"
	"testing"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

func snapMsg(from, to, index uint64, size int) raftpb.Message {
	return raftpb.Message{Type: raftpb.MsgSnap, From: from, To: to, Term: 3, Snapshot: &raftpb.Snapshot{
		Data: bytes.Repeat([]byte{byte(index)}, size),
		Metadata: raftpb.SnapshotMetadata{Index: index, Term: 3,
			ConfState: raftpb.ConfState{Voters: []uint64{from, to}}},
	}}
}

func TestSnapshot(t *testing.T) {
	errRefuse := errors.New("disk full")
	tests := []struct {
		name      string
		size      int
		sender    func(*Config)
		receiver  func(*recorder)
		peerDown  bool
		want      etcdraft.SnapshotStatus
		delivered bool
	}{
		{name: "delivered", size: 3 << 20, want: etcdraft.SnapshotFinish, delivered: true},
		{name: "empty data", size: 0, want: etcdraft.SnapshotFinish, delivered: true},
		{name: "receiver's handler fails", size: 1000, want: etcdraft.SnapshotFailure,
			receiver: func(r *recorder) {
				r.fail = func(_ context.Context, m raftpb.Message) error {
					if m.Type == raftpb.MsgSnap {
						return errRefuse
					}
					return nil
				}
			}},
		{name: "peer down", size: 1000, peerDown: true, want: etcdraft.SnapshotFailure},
		{name: "larger than the frame limit", size: 8 << 10, want: etcdraft.SnapshotFailure,
			sender: func(c *Config) { c.MaxFrameSize = 4 << 10 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newNode(t, 1, tc.sender)
			rb := newRecorder()
			if tc.receiver != nil {
				tc.receiver(rb)
			}
			b := newNode(t, 2, func(c *Config) { c.Handler = rb })
			addr := b.addr
			if tc.peerDown {
				addr = closedAddr(t)
			}
			a.AddPeer(2, addr)
			m := snapMsg(1, 2, 42, tc.size)
			a.Send([]raftpb.Message{m})

			waitFor(t, "ReportSnapshot", func() bool { return len(a.h.snapshotReports()) > 0 })
			reports := a.h.snapshotReports()
			if len(reports) != 1 || reports[0] != (snapReport{2, tc.want}) {
				t.Fatalf("reports = %+v, want one {2 %v}", reports, tc.want)
			}
			if tc.want == etcdraft.SnapshotFailure && a.h.unreachableCount(2) == 0 {
				t.Error("failed snapshot not reported unreachable")
			}
			got := b.h.messages()
			if !tc.delivered {
				if len(got) != 0 {
					t.Fatalf("receiver recorded %d messages, want none", len(got))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("receiver got %d messages, want 1", len(got))
			}
			if g := got[0]; g.Type != raftpb.MsgSnap || g.Snapshot == nil || !bytes.Equal(g.Snapshot.Data, m.Snapshot.Data) ||
				g.Snapshot.Metadata.Index != 42 || len(g.Snapshot.Metadata.ConfState.Voters) != 2 {
				t.Fatalf("snapshot arrived altered: type %s index %d", g.Type, snapIndex(&g))
			}
		})
	}
}

func TestSnapshotDoesNotDelayHeartbeats(t *testing.T) {
	release := make(chan struct{})
	rb := newRecorder()
	rb.fail = func(ctx context.Context, m raftpb.Message) error {
		if m.Type != raftpb.MsgSnap {
			return nil
		}
		select { // the receiver is slow to take the snapshot
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	a := newNode(t, 1, nil)
	b := newNode(t, 2, func(c *Config) { c.Handler = rb })
	link(t, a, b)

	a.Send([]raftpb.Message{snapMsg(1, 2, 10, 1<<20)})
	for i := range 50 {
		a.Send([]raftpb.Message{{Type: raftpb.MsgHeartbeat, From: 1, To: 2, Term: 3, Commit: uint64(i)}})
	}
	waitFor(t, "heartbeats while the snapshot is pending", func() bool { return b.h.count() == 50 })
	if n := len(a.h.snapshotReports()); n != 0 {
		t.Fatalf("%d snapshot reports before the receiver took it", n)
	}
	close(release)
	waitFor(t, "SnapshotFinish", func() bool { return len(a.h.snapshotReports()) == 1 })
	if r := a.h.snapshotReports()[0]; r.status != etcdraft.SnapshotFinish {
		t.Fatalf("report %+v, want finish", r)
	}
}

func TestEverySnapshotIsReported(t *testing.T) {
	release := make(chan struct{})
	rb := newRecorder()
	rb.fail = func(ctx context.Context, m raftpb.Message) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	a := newNode(t, 1, nil)
	b := newNode(t, 2, func(c *Config) { c.Handler = rb })
	a.AddPeer(2, b.addr)
	const n = 3 * snapQueueSize
	for i := range n {
		a.Send([]raftpb.Message{snapMsg(1, 2, uint64(i+1), 100)}) // more than the queue holds
	}
	waitFor(t, "failures for the overflow", func() bool { return len(a.h.snapshotReports()) >= n-snapQueueSize-1 })
	close(release)
	waitFor(t, "a report for every snapshot", func() bool { return len(a.h.snapshotReports()) == n })
	finished := 0
	for _, r := range a.h.snapshotReports() {
		if r.status == etcdraft.SnapshotFinish {
			finished++
		}
	}
	if finished != b.h.count() || finished == 0 || finished > snapQueueSize+1 {
		t.Fatalf("%d finished, %d received; want equal, between 1 and %d", finished, b.h.count(), snapQueueSize+1)
	}
}
