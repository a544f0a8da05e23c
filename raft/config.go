package raft

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/isle-cluster/isle/raft/kv"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Node. Zero values take the documented defaults.
type Config struct {
	// DataDir holds the member file, the WAL and the snapshots. Required.
	DataDir string
	// Name is the member's human-readable name (the board's hostname). Required.
	Name string
	// RaftAddr is the address peers reach this member's transport at. Required.
	RaftAddr string
	// ClientAddr is the address of this member's store API, advertised to
	// peers so that joiners and clients can find every member. Optional.
	ClientAddr string

	// TickInterval is the length of one raft tick. Default 100ms.
	TickInterval time.Duration
	// HeartbeatTicks is the leader's heartbeat period in ticks. Default 1.
	HeartbeatTicks int
	// ElectionTicks is the election timeout in ticks (randomized up to 2x by
	// raft). Default 5: a dead leader is replaced in 0.5–1 s plus one round.
	ElectionTicks int

	// SnapshotEntries takes a snapshot after this many applied entries.
	// Default 100000.
	SnapshotEntries uint64
	// SnapshotBytes takes a snapshot after this many bytes of applied
	// entries (or CatchUpBytes, if fewer), and is the least a snapshot file
	// waits for (see SnapshotFileRatio). Default 16 MiB.
	SnapshotBytes uint64
	// SnapshotFileRatio decides which snapshots are written to a file. A
	// snapshot is written when SnapshotEntries entries were applied since
	// the last file, or more entry bytes than both SnapshotBytes and this
	// many times the last file's size; the others are kept in memory only,
	// as a copy-on-write clone of the store encoded only when a lagging
	// member needs it, where they bound the in-memory log and serve lagging
	// members as a file would. A file costs its size in disk writes (on SD
	// cards: wear) and lets the WAL before it go: with ratio R, snapshot
	// files add at most 1/R to the bytes the WAL writes on a large store
	// (instead of as much again), and a restart replays at most R times the
	// store's size of entries from the WAL. Default 4.
	SnapshotFileRatio uint64
	// CatchUpEntries is how many entries are kept in memory behind a
	// snapshot for slow followers, at most. Default 1000.
	CatchUpEntries uint64
	// CatchUpBytes bounds the bytes of those entries, and of the entries
	// applied between two snapshots: the in-memory log holds about twice
	// this at most. A follower further behind gets a snapshot. Default
	// 2 MiB: on a board of 512 MiB every MiB counts, and a follower 2 MiB
	// of entries behind (seconds of the busiest writes) catches up as fast
	// from a snapshot.
	CatchUpBytes uint64
	// WALSegmentSize is the WAL's segment size. Default: the WAL's own.
	WALSegmentSize int64

	// KV configures the state machine.
	KV kv.Options

	// Clock drives ticks. Default: the real clock.
	Clock Clock
	// Logger receives the node's logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the node's metrics. Default: none.
	Registerer prometheus.Registerer
}

func (c *Config) validate() error {
	if c.DataDir == "" {
		return errors.New("config: DataDir is required")
	}
	if c.Name == "" {
		return errors.New("config: Name is required")
	}
	if c.RaftAddr == "" {
		return errors.New("config: RaftAddr is required")
	}
	if c.TickInterval == 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = 1
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = 5
	}
	if c.TickInterval < time.Millisecond {
		return fmt.Errorf("config: TickInterval %v is below 1ms", c.TickInterval)
	}
	if c.HeartbeatTicks < 1 || c.ElectionTicks <= c.HeartbeatTicks {
		return fmt.Errorf("config: ElectionTicks (%d) must be greater than HeartbeatTicks (%d) >= 1",
			c.ElectionTicks, c.HeartbeatTicks)
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = 100000
	}
	if c.SnapshotBytes == 0 {
		c.SnapshotBytes = 16 << 20
	}
	if c.SnapshotFileRatio == 0 {
		c.SnapshotFileRatio = 4
	}
	if c.CatchUpEntries == 0 {
		c.CatchUpEntries = 1000
	}
	if c.CatchUpBytes == 0 {
		c.CatchUpBytes = 2 << 20
	}
	if c.Clock == nil {
		c.Clock = RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Clock makes the tickers that drive raft time, so tests can inject theirs.
type Clock interface {
	NewTicker(d time.Duration) Ticker
}

// Ticker delivers ticks on C until stopped.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// RealClock is the wall clock.
type RealClock struct{}

// NewTicker returns a time.Ticker.
func (RealClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }
