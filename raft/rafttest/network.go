// Package rafttest runs in-process store clusters for tests: members talk
// over a fault-injecting network (partitions, drops, delays that reorder)
// whose every decision comes from a seeded random source, and their time is
// an injected clock the test drives and can stop per member.
package rafttest

import (
	"context"
	"math/rand"
	"sync"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Handler receives messages for one member (raft.Node implements it).
type Handler interface {
	Process(ctx context.Context, m raftpb.Message) error
	ReportUnreachable(id uint64)
	ReportSnapshot(id uint64, status etcdraft.SnapshotStatus)
}

// Network connects in-process members. The zero value is not usable; use
// NewNetwork.
type Network struct {
	mu       sync.Mutex
	rng      *rand.Rand
	handlers map[uint64]Handler
	cut      map[[2]uint64]bool
	drop     float64
	minDelay time.Duration
	maxDelay time.Duration
	wg       sync.WaitGroup
	closed   bool
	stats    Stats
}

// Stats counts what the network did.
type Stats struct {
	Sent, Dropped, Cut uint64
}

// NewNetwork returns a network whose faults are drawn from seed.
func NewNetwork(seed int64) *Network {
	return &Network{
		rng:      rand.New(rand.NewSource(seed)),
		handlers: map[uint64]Handler{},
		cut:      map[[2]uint64]bool{},
	}
}

// Attach connects a member's handler and returns its transport.
func (n *Network) Attach(id uint64, h Handler) *Endpoint {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.handlers[id] = h
	return &Endpoint{net: n, id: id}
}

// Detach disconnects a member (it crashed): messages to it are lost.
func (n *Network) Detach(id uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.handlers, id)
}

// Partition cuts every link between members of different groups. Members
// in no group keep their links.
func (n *Network) Partition(groups ...[]uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, g := range groups {
		for j, h := range groups {
			if i == j {
				continue
			}
			for _, a := range g {
				for _, b := range h {
					n.cut[[2]uint64{a, b}] = true
				}
			}
		}
	}
}

// Isolate cuts every link to and from id.
func (n *Network) Isolate(id uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for other := range n.handlers {
		if other != id {
			n.cut[[2]uint64{id, other}] = true
			n.cut[[2]uint64{other, id}] = true
		}
	}
}

// Heal restores every link.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut = map[[2]uint64]bool{}
}

// SetFaults sets the probability of losing a message and the range of
// delivery delays; different delays reorder messages.
func (n *Network) SetFaults(drop float64, minDelay, maxDelay time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.drop, n.minDelay, n.maxDelay = drop, minDelay, maxDelay
}

// Stats returns what the network has done so far.
func (n *Network) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Close waits for messages in flight to be delivered or dropped.
func (n *Network) Close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.wg.Wait()
}

// Endpoint is one member's transport on the network.
type Endpoint struct {
	net *Network
	id  uint64
}

// AddPeer does nothing: the network knows every member by ID.
func (e *Endpoint) AddPeer(uint64, string) {}

// RemovePeer does nothing: the network knows every member by ID.
func (e *Endpoint) RemovePeer(uint64) {}

// Send delivers messages according to the network's faults. It never blocks.
func (e *Endpoint) Send(msgs []raftpb.Message) {
	n := e.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	from := n.handlers[e.id]
	for _, m := range msgs {
		n.stats.Sent++
		to, ok := n.handlers[m.To]
		switch {
		case !ok || n.cut[[2]uint64{e.id, m.To}]:
			n.stats.Cut++
			n.report(from, m)
			continue
		case n.drop > 0 && n.rng.Float64() < n.drop:
			n.stats.Dropped++
			n.report(from, m)
			continue
		}
		delay := n.minDelay
		if n.maxDelay > n.minDelay {
			delay += time.Duration(n.rng.Int63n(int64(n.maxDelay - n.minDelay)))
		}
		n.wg.Add(1)
		m := m
		deliver := func() {
			defer n.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := to.Process(ctx, m)
			if m.Type == raftpb.MsgSnap && from != nil {
				st := etcdraft.SnapshotFinish
				if err != nil {
					st = etcdraft.SnapshotFailure
				}
				go from.ReportSnapshot(m.To, st)
			}
		}
		if delay == 0 {
			go deliver()
		} else {
			time.AfterFunc(delay, deliver)
		}
	}
}

// report tells the sender about a lost message the way a real transport
// would: unreachable for a cut link, a failed snapshot for a lost MsgSnap.
func (n *Network) report(from Handler, m raftpb.Message) {
	if from == nil {
		return
	}
	to := m.To
	if m.Type == raftpb.MsgSnap {
		go from.ReportSnapshot(to, etcdraft.SnapshotFailure)
	}
	go from.ReportUnreachable(to)
}
