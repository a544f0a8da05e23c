package rafttest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/isle-cluster/isle/raft"
)

// Options shape a test cluster. Zero values take the documented defaults.
type Options struct {
	Size int   // voters; default 3
	Seed int64 // drives the network's faults
	// TickEvery is the real time between ticks of the cluster's driver;
	// default 2ms (raft's timing is in ticks, so this only sets the pace).
	TickEvery time.Duration
	// Tune adjusts each member's config (snapshot thresholds, say).
	Tune func(*raft.Config)
	// State, if set, is the key/value state the first member starts the
	// cluster from (raft.Bootstrap.Seed).
	State []byte
}

// Cluster is an in-process store cluster on a Network.
type Cluster struct {
	t    testing.TB
	opts Options
	Net  *Network

	mu      sync.Mutex
	members map[uint64]*Member
	order   []uint64
	stop    chan struct{}
	done    chan struct{}
	base    string // the members' data directories are made in it
}

// Member is one member of a test cluster.
type Member struct {
	Name  string
	Dir   string
	Clock *Clock
	Node  *raft.Node // nil while crashed
}

// NewCluster starts a cluster of opts.Size voters: the first bootstraps,
// the others join as learners and are promoted, as on real boards.
func NewCluster(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Size == 0 {
		opts.Size = 3
	}
	if opts.TickEvery == 0 {
		opts.TickEvery = 2 * time.Millisecond
	}
	c := &Cluster{
		t: t, opts: opts, Net: NewNetwork(opts.Seed),
		members: map[uint64]*Member{}, stop: make(chan struct{}), done: make(chan struct{}),
		// Made before Close is registered, so it is removed after the
		// members stopped (cleanups run last first).
		base: t.TempDir(),
	}
	t.Cleanup(c.Close)
	go c.drive()

	first := c.startMember("m0", c.memberDir("m0"), raft.Bootstrap{NewCluster: true, Seed: opts.State})
	c.WaitLeader(10 * time.Second)
	for i := 1; i < opts.Size; i++ {
		c.AddMember(fmt.Sprintf("m%d", i), first)
	}
	return c
}

// memberDir makes a new data directory for a member under the cluster's.
func (c *Cluster) memberDir(name string) string {
	c.t.Helper()
	dir, err := os.MkdirTemp(c.base, name+"-")
	if err != nil {
		c.t.Fatal(err)
	}
	return dir
}

// AddMember adds a new voter through the member `via`, as a joining board does.
func (c *Cluster) AddMember(name string, via uint64) uint64 {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	info, err := c.Node(via).AddLearner(ctx, raft.Member{Name: name, RaftAddr: "mem:" + name})
	if err != nil {
		c.t.Fatalf("add learner %s: %v", name, err)
	}
	id := c.startMember(name, c.memberDir(name), raft.Bootstrap{Join: &info})
	for {
		lead := c.WaitLeader(10 * time.Second)
		err := c.Node(lead).Promote(ctx, id)
		if err == nil {
			return id
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("promote %s: %v", name, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (c *Cluster) config(name, dir string, clock *Clock) raft.Config {
	cfg := raft.Config{
		DataDir: dir, Name: name, RaftAddr: "mem:" + name,
		TickInterval: time.Millisecond, HeartbeatTicks: 1, ElectionTicks: 10,
		Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if os.Getenv("RAFTTEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("name", name)
	}
	if c.opts.Tune != nil {
		c.opts.Tune(&cfg)
	}
	return cfg
}

func (c *Cluster) startMember(name, dir string, boot raft.Bootstrap) uint64 {
	c.t.Helper()
	clock := NewClock()
	n, err := raft.Open(c.config(name, dir, clock), boot)
	if err != nil {
		c.t.Fatalf("open member %s: %v", name, err)
	}
	n.Start(c.Net.Attach(n.ID(), n))
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.members[n.ID()]; !ok {
		c.order = append(c.order, n.ID())
	}
	c.members[n.ID()] = &Member{Name: name, Dir: dir, Clock: clock, Node: n}
	return n.ID()
}

// drive ticks every running member's clock.
func (c *Cluster) drive() {
	defer close(c.done)
	tk := time.NewTicker(c.opts.TickEvery)
	defer tk.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tk.C:
		}
		c.mu.Lock()
		for _, m := range c.members {
			if m.Node != nil {
				m.Clock.Tick(time.Millisecond)
			}
		}
		c.mu.Unlock()
	}
}

// IDs returns the member IDs in the order they joined.
func (c *Cluster) IDs() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint64(nil), c.order...)
}

// Member returns a member by ID.
func (c *Cluster) Member(id uint64) *Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[id]
}

// Node returns a running member's node, or nil if it is crashed.
func (c *Cluster) Node(id uint64) *raft.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.members[id]; m != nil {
		return m.Node
	}
	return nil
}

// Crash stops a member abruptly: it drops off the network and its node
// stops; its data directory stays as the crash left it.
func (c *Cluster) Crash(id uint64) {
	c.mu.Lock()
	m := c.members[id]
	n := m.Node
	m.Node = nil
	c.mu.Unlock()
	if n == nil {
		return
	}
	c.Net.Detach(id)
	n.Stop()
}

// Restart starts a crashed member again from its data directory.
func (c *Cluster) Restart(id uint64) {
	c.t.Helper()
	c.mu.Lock()
	m := c.members[id]
	running := m.Node != nil
	c.mu.Unlock()
	if !running {
		c.startMember(m.Name, m.Dir, raft.Bootstrap{})
	}
}

// RestartWith starts a crashed member again from its data directory with
// boot (raft.Bootstrap.ForceNewCluster, say).
func (c *Cluster) RestartWith(id uint64, boot raft.Bootstrap) {
	c.t.Helper()
	c.mu.Lock()
	m := c.members[id]
	running := m.Node != nil
	c.mu.Unlock()
	if running {
		c.t.Fatalf("restart %s: it is running", m.Name)
	}
	c.startMember(m.Name, m.Dir, boot)
}

// Leader returns the ID of a leader that a running member reports and that
// reports itself leader, or 0.
func (c *Cluster) Leader() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.members {
		if m.Node == nil {
			continue
		}
		lead := m.Node.Leader()
		if l, ok := c.members[lead]; ok && l.Node != nil && l.Node.Leader() == lead {
			return lead
		}
	}
	return 0
}

// WaitLeader waits for a leader and returns its ID.
func (c *Cluster) WaitLeader(timeout time.Duration) uint64 {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if id := c.Leader(); id != 0 {
			return id
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no leader after %v", timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// Close stops every member and the network.
func (c *Cluster) Close() {
	select {
	case <-c.stop:
		return
	default:
	}
	close(c.stop)
	<-c.done
	for _, id := range c.IDs() {
		c.Crash(id)
	}
	c.Net.Close()
}
