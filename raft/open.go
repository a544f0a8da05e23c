package raft

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/isle-cluster/isle/raft/atomicfile"
	"github.com/isle-cluster/isle/raft/kv"
	"github.com/isle-cluster/isle/raft/snap"
	"github.com/isle-cluster/isle/raft/wal"
)

// Bootstrap says how a member with an empty data directory starts. A data
// directory that already holds a member restarts that member and ignores it.
type Bootstrap struct {
	// NewCluster starts a new cluster with this member as its only voter.
	NewCluster bool
	// Join starts a member that an existing cluster has added as a learner
	// (see AddLearner).
	Join *JoinInfo
	// Seed, with NewCluster, starts the new cluster from a key/value state
	// that Backup returned (a restore): the first snapshot holds it, so the
	// store starts at its revision.
	Seed []byte
	// ForceNewCluster recovers a member that restarts after its cluster
	// lost quorum for good: it becomes the only voter of a new cluster (a
	// new cluster ID, every other member removed) holding what it had
	// committed; entries it had not seen committed are dropped. It needs a
	// data directory that holds a member.
	ForceNewCluster bool
}

// JoinInfo is what a cluster tells a member it has just added.
type JoinInfo struct {
	ClusterID uint64   `json:"clusterID"`
	MemberID  uint64   `json:"memberID"`
	Members   []Member `json:"members"`
}

// memberFile records who this data directory belongs to, and the format
// of the files in it.
type memberFile struct {
	ClusterID uint64 `json:"clusterID"`
	MemberID  uint64 `json:"memberID"`
	Name      string `json:"name"`
	Format    int    `json:"format"`
	// Forced is set when this member forced a new cluster, and cleared at
	// its first start without ForceNewCluster: a flag left on the command
	// line does not force again (and drop the members added since).
	Forced bool `json:"forced,omitempty"`
}

// DataFormat is the format of the data directory this package writes: of
// its WAL, snapshots and member file. A directory of a newer format is
// refused (an older isle must not guess at it); one of an older format is
// brought forward by migrations, one step per format, before anything
// else reads it. Format 0 is every directory written before the format
// was recorded; format 1 is the same files with the format recorded;
// format 2 WALs may hold padding records (raft/wal), which readers of
// format 1 would take for corruption.
const DataFormat = 2

// migrations[i] brings a data directory from format i to i+1. Each must
// be safe to run again after a crash part-way: the format is recorded
// only after the step.
var migrations = [DataFormat]func(dir string) error{
	func(string) error { return nil }, // 0 → 1: the files are unchanged
	func(string) error { return nil }, // 1 → 2: the WAL is read as it is and padded from now on
}

const memberFileName = "member.json"

// Open opens (or creates) the member in cfg.DataDir: it reads the member
// file, opens the WAL, loads the newest snapshot and rebuilds the state
// machine from it and the log. Call Start to run it.
func Open(cfg Config, boot Bootstrap) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("raft: open: %w", err)
	}
	mf, existed, err := loadMemberFile(cfg)
	if err != nil {
		return nil, err
	}
	switch {
	case boot.Seed != nil && !boot.NewCluster:
		return nil, errors.New("raft: open: a seed needs a new cluster")
	case boot.ForceNewCluster && !existed:
		return nil, fmt.Errorf("raft: open: force a new cluster: %s holds no member to recover", cfg.DataDir)
	case !existed:
		if mf, err = newMemberFile(cfg, boot); err != nil {
			return nil, err
		}
		if boot.Seed != nil {
			// Leftovers of a restore that stopped before its member file
			// was written: the member file marks a member complete.
			for _, d := range []string{"wal", "snap"} {
				if err := os.RemoveAll(filepath.Join(cfg.DataDir, d)); err != nil {
					return nil, fmt.Errorf("raft: open: %w", err)
				}
			}
		} else if err := saveMemberFile(cfg.DataDir, mf); err != nil {
			return nil, err
		}
	}
	n := &Node{
		cfg:       cfg,
		log:       cfg.Logger.With("member", fmt.Sprintf("%x", mf.MemberID)),
		id:        mf.MemberID,
		clusterID: mf.ClusterID,
		metrics:   newMetrics(cfg.Registerer),
		storage:   newLogStorage(),
		kv:        kv.New(cfg.KV),
		members:   newMembership(),
		pending:   map[uint64]*proposal{},
		heard:     map[uint64]uint64{},
		propc:     make(chan *proposal, 4096),
		recvc:     make(chan raftpb.Message, 4096),
		readc:     make(chan *readRequest, 4096),
		ctrlc:     make(chan func(), 256),
		stopc:     make(chan struct{}),
		donec:     make(chan struct{}),
		appliedCh: make(chan struct{}),
		leaderCh:  make(chan struct{}),
	}
	if n.snaps, err = snap.New(filepath.Join(cfg.DataDir, "snap"), cfg.Logger); err != nil {
		return nil, fmt.Errorf("raft: open snapshots: %w", err)
	}
	w, st, err := wal.Open(filepath.Join(cfg.DataDir, "wal"), wal.Options{SegmentSize: cfg.WALSegmentSize, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("raft: open WAL: %w", err)
	}
	n.wal = w
	if err := n.restore(st); err != nil {
		w.Close()
		return nil, err
	}
	switch {
	case existed && boot.ForceNewCluster && mf.Forced:
		n.log.Warn("raft: not forcing a new cluster again: this member forced the one it is in, and has not started without the flag since; remove the flag")
	case existed && boot.ForceNewCluster:
		err = n.forceNewCluster(st, mf)
	case existed && mf.Forced:
		mf.Forced = false
		err = saveMemberFile(cfg.DataDir, mf)
	case !existed && boot.Seed != nil:
		err = n.seed(boot.Seed, mf)
	}
	if err != nil {
		w.Close()
		return nil, err
	}

	rc := &etcdraft.Config{
		ID:              n.id,
		ElectionTick:    cfg.ElectionTicks,
		HeartbeatTick:   cfg.HeartbeatTicks,
		Storage:         n.storage,
		Applied:         n.applied,
		MaxSizePerMsg:   1 << 20,
		MaxInflightMsgs: 256,
		// Bytes bound memory where counts do not: a follower's messages in
		// flight, and proposals not committed yet.
		MaxInflightBytes:          32 << 20,
		MaxUncommittedEntriesSize: 64 << 20,
		MaxCommittedSizePerReady:  8 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{n.log},
	}
	if n.rn, err = etcdraft.NewRawNode(rc); err != nil {
		w.Close()
		return nil, fmt.Errorf("raft: start raft: %w", err)
	}
	switch {
	case !existed && boot.Seed != nil:
		n.log.Info("raft: started a new cluster from a seed", "cluster", fmt.Sprintf("%x", n.clusterID), "revision", n.kv.Revision())
	case existed:
		n.log.Info("raft: restarting member", "cluster", fmt.Sprintf("%x", n.clusterID),
			"snapshot", n.snapIndex, "entries", len(st.Entries), "term", st.HardState.Term)
	case boot.NewCluster:
		ctx, err := json.Marshal(confContext{Member: Member{ID: n.id, Name: cfg.Name, RaftAddr: cfg.RaftAddr, ClientAddr: cfg.ClientAddr}})
		if err != nil {
			return nil, fmt.Errorf("raft: bootstrap: %w", err)
		}
		if err := n.rn.Bootstrap([]etcdraft.Peer{{ID: n.id, Context: ctx}}); err != nil {
			w.Close()
			return nil, fmt.Errorf("raft: bootstrap: %w", err)
		}
		n.log.Info("raft: started a new cluster", "cluster", fmt.Sprintf("%x", n.clusterID))
	default:
		// The member table comes from the log alone; the joiner only
		// needs the members' addresses to answer the leader.
		n.joinPeers = boot.Join.Members
		n.log.Info("raft: joining cluster", "cluster", fmt.Sprintf("%x", n.clusterID), "members", len(boot.Join.Members))
	}
	n.publishMembers()
	return n, nil
}

// restore installs the WAL's snapshot and entries in memory and rebuilds the
// state machine from the snapshot; the entries after it are re-applied by
// the Ready loop as raft hands them over as committed.
func (n *Node) restore(st *wal.State) error {
	if st.Snapshot.Index > 0 {
		s, err := n.snaps.Load(st.Snapshot)
		if err != nil {
			return fmt.Errorf("raft: open: the WAL needs snapshot %d (term %d): %w", st.Snapshot.Index, st.Snapshot.Term, err)
		}
		if err := n.installSnapshot(s); err != nil {
			return fmt.Errorf("raft: open: %w", err)
		}
	}
	if !etcdraft.IsEmptyHardState(st.HardState) {
		if err := n.storage.SetHardState(st.HardState); err != nil {
			return fmt.Errorf("raft: open: %w", err)
		}
	}
	if err := n.storage.Append(st.Entries); err != nil {
		return fmt.Errorf("raft: open: %w", err)
	}
	return nil
}

// installSnapshot replaces the in-memory log and the state machine with s,
// a snapshot that is in a file.
func (n *Node) installSnapshot(s raftpb.Snapshot) error {
	ms, kvData, err := decodeSnapshot(s.Data)
	if err != nil {
		return fmt.Errorf("install snapshot %d: %w", s.Metadata.Index, err)
	}
	if err := n.kv.Restore(kvData); err != nil {
		return fmt.Errorf("install snapshot %d: %w", s.Metadata.Index, err)
	}
	// The member table is marshalled again rather than kept as a slice of
	// s.Data, which would keep all of s.Data alive.
	mj, err := ms.marshal()
	if err != nil {
		return fmt.Errorf("install snapshot %d: %w", s.Metadata.Index, err)
	}
	if err := n.storage.applySnapshot(s, n.kv.Freeze(), mj); err != nil && !errors.Is(err, etcdraft.ErrSnapOutOfDate) {
		return fmt.Errorf("install snapshot %d: %w", s.Metadata.Index, err)
	}
	n.members = ms
	n.confState = s.Metadata.ConfState
	n.snapIndex, n.fileIndex = s.Metadata.Index, s.Metadata.Index
	n.lastFileSize = uint64(len(s.Data))
	n.applied = s.Metadata.Index
	n.bytesSince, n.fileBytes = 0, 0
	n.publishApplied(n.applied)
	return nil
}

// loadMemberFile reads the member file, if there is one.
func loadMemberFile(cfg Config) (memberFile, bool, error) {
	path := filepath.Join(cfg.DataDir, memberFileName)
	var mf memberFile
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &mf); err != nil || mf.MemberID == 0 || mf.ClusterID == 0 {
			return mf, false, fmt.Errorf("raft: open: member file %s is damaged (%v); restore it or remove the data directory to start over", path, err)
		}
		if err := migrate(cfg, path, &mf); err != nil {
			return mf, false, err
		}
		return mf, true, nil
	case errors.Is(err, os.ErrNotExist):
		return mf, false, nil
	}
	return mf, false, fmt.Errorf("raft: open: %w", err)
}

// newMemberFile makes the member file of a new member.
func newMemberFile(cfg Config, boot Bootstrap) (memberFile, error) {
	switch {
	case boot.NewCluster && boot.Join != nil:
		return memberFile{}, errors.New("raft: open: choose one of a new cluster and joining one, not both")
	case boot.NewCluster:
		return memberFile{ClusterID: randomID(), MemberID: randomID(), Name: cfg.Name, Format: DataFormat}, nil
	case boot.Join != nil:
		if boot.Join.ClusterID == 0 || boot.Join.MemberID == 0 {
			return memberFile{}, errors.New("raft: open: join information lacks the cluster or member ID")
		}
		return memberFile{ClusterID: boot.Join.ClusterID, MemberID: boot.Join.MemberID, Name: cfg.Name, Format: DataFormat}, nil
	}
	return memberFile{}, fmt.Errorf("raft: open: %s holds no member: start a new cluster or join one", cfg.DataDir)
}

func saveMemberFile(dir string, mf memberFile) error {
	if err := writeMemberFile(filepath.Join(dir, memberFileName), mf); err != nil {
		return fmt.Errorf("raft: open: %w", err)
	}
	return nil
}

func writeMemberFile(path string, mf memberFile) error {
	b, err := json.Marshal(mf)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return fmt.Errorf("write member file: %w", err)
	}
	return nil
}

// migrate refuses a data directory of a newer format than DataFormat and
// brings one of an older format forward, recording each step.
func migrate(cfg Config, path string, mf *memberFile) error {
	switch {
	case mf.Format > DataFormat:
		return fmt.Errorf("raft: open: %s is data format %d, written by a newer isle; this isle reads formats up to %d: run the newer isle again (a downgrade needs a snapshot taken by this version)", cfg.DataDir, mf.Format, DataFormat)
	case mf.Format < 0:
		return fmt.Errorf("raft: open: member file %s is damaged: data format %d", path, mf.Format)
	}
	for mf.Format < DataFormat {
		from := mf.Format
		if err := migrations[from](cfg.DataDir); err != nil {
			return fmt.Errorf("raft: open: migrate %s from data format %d to %d: %w", cfg.DataDir, from, from+1, err)
		}
		mf.Format++
		if err := writeMemberFile(path, *mf); err != nil {
			return fmt.Errorf("raft: open: migrate %s from data format %d to %d: %w", cfg.DataDir, from, from+1, err)
		}
		cfg.Logger.Info("raft: data directory migrated", "dir", cfg.DataDir, "from", from, "to", mf.Format)
	}
	return nil
}

// randomID returns a random non-zero 64-bit ID.
func randomID() uint64 {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic("raft: crypto/rand failed: " + err.Error())
		}
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 && id != etcdraft.LocalAppendThread && id != etcdraft.LocalApplyThread {
			return id
		}
	}
}

// HasMember reports whether dataDir already holds a member (which Open
// restarts, whatever its Bootstrap says).
func HasMember(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, memberFileName))
	return err == nil
}
