package raft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/isle-cluster/isle/raft/kv"
	"github.com/isle-cluster/isle/raft/snap"
	"github.com/isle-cluster/isle/raft/wal"
)

// Errors callers branch on.
var (
	// ErrStopped: the node has stopped (Stop was called or it failed).
	ErrStopped = errors.New("raft: node stopped")
	// ErrNoLeader: raft refused the proposal (no leader known) until the
	// deadline; it was never handed on, so it was not applied.
	ErrNoLeader = errors.New("raft: no leader: the store has lost quorum or is electing")
	// ErrTimeout: the proposal was handed to raft but not seen applied
	// before the deadline; it may still be applied later.
	ErrTimeout = errors.New("raft: request timed out: outcome unknown")
	// ErrRefused: a membership change was refused (the error says why).
	ErrRefused = errors.New("raft: membership change refused")
	// ErrRemoved: this member has been removed from the cluster.
	ErrRemoved = errors.New("raft: this member was removed from the cluster")
)

// Transport carries raft messages to peers. Send must never block.
type Transport interface {
	Send(msgs []raftpb.Message)
	AddPeer(id uint64, addr string)
	RemovePeer(id uint64)
}

// Node is one member of the replicated store.
type Node struct {
	cfg       Config
	log       *slog.Logger
	id        uint64
	clusterID uint64
	metrics   *metrics

	rn      *etcdraft.RawNode
	storage *logStorage
	wal     *wal.WAL
	snaps   *snap.Snapshotter
	kv      *kv.Store
	tr      Transport

	// Inputs of the Ready loop.
	propc  chan *proposal
	recvc  chan raftpb.Message
	readc  chan *readRequest
	ctrlc  chan func()
	stopc  chan struct{}
	donec  chan struct{}
	start  sync.Once
	stop   sync.Once
	failed atomic.Pointer[error]

	joinPeers []Member // peers a joining member talks to before it has the log

	// Owned by the Ready loop.
	members      *membership
	confState    raftpb.ConfState
	pending      map[uint64]*proposal
	reads        readQueue
	lead         uint64
	ticks        uint64            // ticks since start
	heard        map[uint64]uint64 // peer → tick of its last message
	snapIndex    uint64            // newest snapshot, in memory and maybe in a file
	snapInFlight bool
	bg           sync.WaitGroup // the snapshot writer
	applied      uint64
	bytesSince   uint64 // entry bytes applied since the newest snapshot
	fileIndex    uint64 // newest snapshot written to a file
	lastFileSize uint64
	fileBytes    uint64 // entry bytes applied since the newest file
	ticksToRead  int

	// Published by the Ready loop for other goroutines.
	appliedIndex atomic.Uint64
	appliedMu    sync.Mutex
	appliedCh    chan struct{} // closed and replaced on every apply
	statusMu     sync.RWMutex
	memberList   []Member
	leader       atomic.Uint64
	leaderMu     sync.Mutex
	leaderCh     chan struct{} // closed and replaced on every leader change
}

// ID returns this member's ID.
func (n *Node) ID() uint64 { return n.id }

// ClusterID returns the ID of the cluster this member belongs to.
func (n *Node) ClusterID() uint64 { return n.clusterID }

// KV returns the local state machine for stale reads and watches.
func (n *Node) KV() *kv.Store { return n.kv }

// Done is closed when the node has stopped; Err then says why.
func (n *Node) Done() <-chan struct{} { return n.donec }

// Err returns the error that stopped the node, or nil.
func (n *Node) Err() error {
	if p := n.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Leader returns the current leader's ID as this member last saw it (0: none).
func (n *Node) Leader() uint64 { return n.leader.Load() }

// LeaderChanged returns a channel that is closed at the next leader change
// (including to "no leader"); call it again for the one after.
func (n *Node) LeaderChanged() <-chan struct{} {
	n.leaderMu.Lock()
	defer n.leaderMu.Unlock()
	return n.leaderCh
}

func (n *Node) publishLeader(lead uint64) {
	n.leader.Store(lead)
	n.leaderMu.Lock()
	close(n.leaderCh)
	n.leaderCh = make(chan struct{})
	n.leaderMu.Unlock()
}

// Members returns the member table as of the last applied entry.
func (n *Node) Members() []Member {
	n.statusMu.RLock()
	defer n.statusMu.RUnlock()
	return append([]Member(nil), n.memberList...)
}

// Start runs the Ready loop with the given transport. It returns at once.
func (n *Node) Start(tr Transport) {
	n.start.Do(func() {
		n.tr = tr
		for _, m := range append(n.joinPeers, n.members.list()...) {
			if m.ID != n.id {
				tr.AddPeer(m.ID, m.RaftAddr)
			}
		}
		go n.run()
	})
}

// Stop stops the Ready loop and closes the WAL. Waiting callers get ErrStopped.
func (n *Node) Stop() {
	n.stop.Do(func() { close(n.stopc) })
	n.start.Do(func() { close(n.donec) }) // never started
	<-n.donec
}

// fail records a fatal error and stops the loop; called from the loop only.
func (n *Node) fail(err error) {
	n.log.Error("raft: stopping on fatal error", "err", err)
	n.failed.CompareAndSwap(nil, &err)
	n.stop.Do(func() { close(n.stopc) })
}

// doneErr is what waiters get once the node has stopped.
func (n *Node) doneErr() error {
	if err := n.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrStopped, err)
	}
	return ErrStopped
}

// Process hands an inbound message to the Ready loop (transport.Handler).
func (n *Node) Process(ctx context.Context, m raftpb.Message) error {
	if m.To != n.id {
		return fmt.Errorf("raft: message for member %x delivered to member %x", m.To, n.id)
	}
	select {
	case n.recvc <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.stopc:
		return ErrStopped
	}
}

// ReportUnreachable tells raft that a peer could not be reached (transport.Handler).
func (n *Node) ReportUnreachable(id uint64) {
	n.control(func() { n.rn.ReportUnreachable(id) })
}

// ReportSnapshot tells raft how sending a snapshot ended (transport.Handler).
func (n *Node) ReportSnapshot(id uint64, status etcdraft.SnapshotStatus) {
	n.control(func() { n.rn.ReportSnapshot(id, status) })
}

// control runs f in the Ready loop without blocking the caller for long.
func (n *Node) control(f func()) {
	select {
	case n.ctrlc <- f:
	case <-n.stopc:
	}
}

// inLoop runs f in the Ready loop and returns its result. If ctx ends
// first, f may still run later, but its result goes nowhere: f must only
// return values, never write to the caller's variables.
func inLoop[T any](ctx context.Context, n *Node, f func() T) (T, error) {
	var zero T
	ch := make(chan T, 1)
	select {
	case n.ctrlc <- func() { ch <- f() }:
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-n.stopc:
		return zero, n.doneErr()
	}
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-n.donec:
		return zero, n.doneErr()
	}
}

// publishApplied makes the applied index visible and wakes its waiters.
func (n *Node) publishApplied(index uint64) {
	n.appliedIndex.Store(index)
	n.appliedMu.Lock()
	close(n.appliedCh)
	n.appliedCh = make(chan struct{})
	n.appliedMu.Unlock()
}

// waitApplied waits until the local state machine has applied index.
func (n *Node) waitApplied(ctx context.Context, index uint64) error {
	for {
		n.appliedMu.Lock()
		ch := n.appliedCh
		n.appliedMu.Unlock()
		if n.appliedIndex.Load() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.donec:
			return n.doneErr()
		}
	}
}
