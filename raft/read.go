package raft

import (
	"context"
	"encoding/binary"
	"fmt"

	etcdraft "go.etcd.io/raft/v3"

	"github.com/isle-cluster/isle/raft/kv"
)

// readRequest is one linearizable read waiting for a read index.
type readRequest struct {
	done chan readResult // buffered
}

type readResult struct {
	index uint64
	err   error
}

// readQueue batches concurrent readers into ReadIndex rounds (Ready loop only).
type readQueue struct {
	waiting  []*readRequest
	inflight map[string][]*readRequest
	seq      uint64
}

func (q *readQueue) add(r *readRequest) { q.waiting = append(q.waiting, r) }

func (q *readQueue) inflightCount() int { return len(q.inflight) }

// issue starts one ReadIndex round for every reader waiting, if none is in flight.
func (q *readQueue) issue(rn *etcdraft.RawNode) {
	if len(q.waiting) == 0 || len(q.inflight) > 0 {
		return
	}
	if q.inflight == nil {
		q.inflight = map[string][]*readRequest{}
	}
	q.seq++
	rctx := binary.BigEndian.AppendUint64(nil, q.seq)
	q.inflight[string(rctx)] = q.waiting
	q.waiting = nil
	rn.ReadIndex(rctx)
}

// answer delivers a read index to the round it belongs to.
func (q *readQueue) answer(rs etcdraft.ReadState) {
	rs2, ok := q.inflight[string(rs.RequestCtx)]
	if !ok {
		return
	}
	delete(q.inflight, string(rs.RequestCtx))
	for _, r := range rs2 {
		r.done <- readResult{index: rs.Index}
	}
}

// retry puts in-flight rounds back in the queue: raft drops a ReadIndex
// that reaches no leader, without telling.
func (q *readQueue) retry() {
	for k, rs := range q.inflight {
		q.waiting = append(q.waiting, rs...)
		delete(q.inflight, k)
	}
}

func (q *readQueue) failAll(err error) {
	q.retry()
	for _, r := range q.waiting {
		r.done <- readResult{err: err}
	}
	q.waiting = nil
}

// ReadIndex returns an index such that the local state machine, once it has
// applied it, reflects every write acknowledged before the call.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	r := &readRequest{done: make(chan readResult, 1)}
	select {
	case n.readc <- r:
	case <-ctx.Done():
		return 0, fmt.Errorf("raft: read index: %w", ctx.Err())
	case <-n.stopc:
		return 0, n.doneErr()
	}
	select {
	case res := <-r.done:
		return res.index, res.err
	case <-ctx.Done():
		return 0, fmt.Errorf("raft: read index: %w (%w)", ErrNoLeader, ctx.Err())
	case <-n.donec:
		return 0, n.doneErr()
	}
}

// Sync waits until the local state machine reflects every write
// acknowledged anywhere in the cluster before the call (linearizable).
func (n *Node) Sync(ctx context.Context) error {
	idx, err := n.ReadIndex(ctx)
	if err != nil {
		return err
	}
	return n.waitApplied(ctx, idx)
}

// Get reads one key. With linearizable set it first Syncs; otherwise it
// reads the local state machine, which may lag the leader.
func (n *Node) Get(ctx context.Context, key string, linearizable bool) (kv.KeyValue, bool, int64, error) {
	if linearizable {
		if err := n.Sync(ctx); err != nil {
			return kv.KeyValue{}, false, 0, err
		}
	}
	v, ok, rev := n.kv.Get(key)
	return v, ok, rev, nil
}

// List reads keys with a prefix, from startKey on, at most limit (0: all).
func (n *Node) List(ctx context.Context, prefix, startKey string, limit int, linearizable bool) ([]kv.KeyValue, bool, int64, error) {
	if linearizable {
		if err := n.Sync(ctx); err != nil {
			return nil, false, 0, err
		}
	}
	kvs, more, rev := n.kv.List(prefix, startKey, limit)
	return kvs, more, rev, nil
}

// Watch streams the changes to keys with prefix after revision afterRev,
// as this member applies them (see kv.Store.Watch).
func (n *Node) Watch(ctx context.Context, prefix string, afterRev int64) (*kv.Watcher, error) {
	return n.kv.Watch(ctx, prefix, afterRev)
}
