package raft

import (
	"context"
	"errors"
	"fmt"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/isle-cluster/isle/raft/kv"
)

// proposal is one write waiting to be applied.
type proposal struct {
	id       uint64
	data     []byte               // a kv.Request, or nil for a conf change
	cc       *raftpb.ConfChangeV2 // a membership change, or nil
	done     chan proposalResult  // buffered: the loop never blocks on it
	accepted bool                 // raft took it at least once (Ready loop only)
	start    time.Time
}

type proposalResult struct {
	res kv.Result
	err error
}

// Propose replicates one transaction and returns its result once this
// member has applied it. See the package documentation for the errors.
func (n *Node) Propose(ctx context.Context, ops ...kv.Op) (kv.Result, error) {
	req := kv.Request{ID: randomID(), Ops: ops}
	p := &proposal{id: req.ID, data: req.Marshal(), done: make(chan proposalResult, 1), start: time.Now()}
	r, err := n.wait(ctx, p)
	if err == nil {
		n.metrics.proposeDuration.Observe(time.Since(p.start).Seconds())
	}
	return r.res, err
}

// wait hands p to the Ready loop and waits for its outcome.
func (n *Node) wait(ctx context.Context, p *proposal) (proposalResult, error) {
	select {
	case n.propc <- p:
	case <-ctx.Done():
		return proposalResult{}, fmt.Errorf("raft: propose: %w", ErrNoLeader)
	case <-n.stopc:
		return proposalResult{}, n.doneErr()
	}
	select {
	case r := <-p.done:
		return r, r.err
	case <-n.donec:
		return proposalResult{}, n.doneErr()
	case <-ctx.Done():
	}
	// Withdraw the proposal in the loop, so that whether raft ever took it
	// is settled: after this the loop will not submit it again.
	accepted, err := inLoop(context.Background(), n, func() bool {
		delete(n.pending, p.id)
		return p.accepted
	})
	if err != nil {
		accepted = true // the loop stopped; raft may have taken it
	}
	select {
	case r := <-p.done: // applied just before it was withdrawn
		return r, r.err
	default:
	}
	n.metrics.proposalsFailed.Inc()
	if accepted {
		return proposalResult{}, fmt.Errorf("raft: propose: %w (%w)", ErrTimeout, ctx.Err())
	}
	return proposalResult{}, fmt.Errorf("raft: propose: %w (%w)", ErrNoLeader, ctx.Err())
}

// propose registers p and submits it to raft (Ready loop only).
func (n *Node) propose(p *proposal) {
	n.pending[p.id] = p
	n.submit(p)
}

// submit hands p to raft. A dropped proposal stays pending and is retried
// on the next tick with a leader, or when a leader appears.
func (n *Node) submit(p *proposal) {
	var err error
	if p.cc != nil {
		err = n.rn.ProposeConfChange(*p.cc)
	} else {
		err = n.rn.Propose(p.data)
	}
	switch {
	case err == nil:
		p.accepted = true
	case errors.Is(err, etcdraft.ErrProposalDropped):
		n.metrics.proposalsDropped.Inc()
	default:
		n.finish(p.id, proposalResult{err: fmt.Errorf("raft: propose: %w", err)})
	}
}

// finish delivers a result to the proposal's waiter, if it is still waiting
// on this member.
func (n *Node) finish(id uint64, r proposalResult) {
	p, ok := n.pending[id]
	if !ok {
		return
	}
	delete(n.pending, id)
	p.done <- r
}
