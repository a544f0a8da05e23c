package raft

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/isle-cluster/isle/raft/kv"
)

// run is the Ready loop: the only goroutine that touches the RawNode, the
// WAL, the snapshot files and the state machine's write side.
func (n *Node) run() {
	defer close(n.donec)
	defer n.shutdown()
	ticker := n.cfg.Clock.NewTicker(n.cfg.TickInterval)
	defer ticker.Stop()

	for {
		select {
		case <-ticker.C():
			n.ticks++
			n.rn.Tick()
			n.onTick()
		case m := <-n.recvc:
			n.step(m)
		case p := <-n.propc:
			n.propose(p)
		case r := <-n.readc:
			n.reads.add(r)
		case f := <-n.ctrlc:
			f()
		case <-n.stopc:
			return
		}
		n.drainInputs()
		n.reads.issue(n.rn)
		for n.rn.HasReady() {
			if err := n.handleReady(); err != nil {
				n.fail(err)
				return
			}
		}
	}
}

// drainInputs feeds everything already queued to raft, so that one Ready
// (and one fsync) covers as many proposals and messages as possible.
func (n *Node) drainInputs() {
	for i := 0; i < 4096; i++ {
		select {
		case m := <-n.recvc:
			n.step(m)
		case p := <-n.propc:
			n.propose(p)
		case r := <-n.readc:
			n.reads.add(r)
		case f := <-n.ctrlc:
			f()
		default:
			return
		}
	}
}

func (n *Node) step(m raftpb.Message) {
	if n.members.removed[m.From] {
		n.metrics.droppedFromRemoved.Inc()
		return
	}
	n.heard[m.From] = n.ticks
	if err := n.rn.Step(m); err != nil {
		n.log.Debug("raft: step", "type", m.Type, "from", fmt.Sprintf("%x", m.From), "err", err)
	}
}

// active reports whether this member has heard from a peer within an
// election timeout (itself always counts).
func (n *Node) active(id uint64) bool {
	if id == n.id {
		return true
	}
	at, ok := n.heard[id]
	return ok && n.ticks-at <= uint64(n.cfg.ElectionTicks)
}

// onTick retries what raft may have dropped while there was no leader.
func (n *Node) onTick() {
	if n.lead == etcdraft.None {
		return
	}
	for _, p := range n.pending {
		if !p.accepted {
			n.submit(p)
		}
	}
	if n.reads.inflightCount() > 0 {
		n.ticksToRead++
		if n.ticksToRead >= 2*n.cfg.ElectionTicks {
			n.ticksToRead = 0
			n.reads.retry()
		}
	}
}

// handleReady persists, sends, applies and advances one Ready.
func (n *Node) handleReady() error {
	rd := n.rn.Ready()
	start := time.Now()

	if !etcdraft.IsEmptySnap(rd.Snapshot) {
		// Snapshot file, then its marker, then the entries after it: the WAL
		// never holds entries that skip past what it has.
		if err := n.snaps.Save(rd.Snapshot); err != nil {
			return fmt.Errorf("raft: save received snapshot: %w", err)
		}
		n.metrics.snapshotFileBytes.Add(float64(len(rd.Snapshot.Data)))
		if err := n.wal.SaveSnapshot(rd.Snapshot.Metadata); err != nil {
			return fmt.Errorf("raft: record received snapshot: %w", err)
		}
	}
	if !etcdraft.IsEmptyHardState(rd.HardState) || len(rd.Entries) > 0 {
		if err := n.wal.Save(rd.HardState, rd.Entries, rd.MustSync); err != nil {
			return fmt.Errorf("raft: persist: %w", err)
		}
		if rd.MustSync {
			n.metrics.syncDuration.Observe(time.Since(start).Seconds())
		}
	}
	if !etcdraft.IsEmptySnap(rd.Snapshot) {
		if err := n.installSnapshot(rd.Snapshot); err != nil {
			return fmt.Errorf("raft: %w", err)
		}
		n.syncPeers()
		n.publishMembers()
		n.log.Info("raft: installed snapshot from leader", "index", rd.Snapshot.Metadata.Index)
	}
	if err := n.storage.Append(rd.Entries); err != nil {
		return fmt.Errorf("raft: append to memory log: %w", err)
	}
	if !etcdraft.IsEmptyHardState(rd.HardState) {
		n.storage.SetHardState(rd.HardState)
	}
	n.freshenSnapshots(rd.Messages)
	n.tr.Send(rd.Messages)

	if rd.SoftState != nil && rd.SoftState.Lead != n.lead {
		n.leaderChanged(rd.SoftState.Lead)
	}
	if err := n.apply(rd.CommittedEntries); err != nil {
		return err
	}
	for _, rs := range rd.ReadStates {
		n.reads.answer(rs)
	}
	n.maybeSnapshot()
	n.rn.Advance(rd)
	return nil
}

// leaderChanged re-proposes everything in flight: raft may have dropped a
// proposal forwarded to the old leader, and the state machine's request
// de-duplication makes a second copy harmless.
func (n *Node) leaderChanged(lead uint64) {
	n.log.Info("raft: leader changed", "from", fmt.Sprintf("%x", n.lead), "to", fmt.Sprintf("%x", lead))
	n.metrics.leaderChanges.Inc()
	n.lead = lead
	n.publishLeader(lead)
	if lead == etcdraft.None {
		return
	}
	for _, p := range n.pending {
		n.submit(p)
	}
	n.reads.retry()
}

// apply applies committed entries in order and wakes their proposers.
func (n *Node) apply(ents []raftpb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	for i := range ents {
		e := &ents[i]
		if e.Index <= n.applied {
			continue // already in the state machine's snapshot
		}
		switch e.Type {
		case raftpb.EntryNormal:
			if len(e.Data) > 0 {
				res := n.kv.Apply(e.Data)
				if id, err := kv.PeekID(e.Data); err == nil {
					n.finish(id, proposalResult{res: res})
				}
			}
		case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
			if err := n.applyConfChange(e); err != nil {
				return err
			}
		}
		n.applied = e.Index
		n.bytesSince += uint64(len(e.Data))
		n.fileBytes += uint64(len(e.Data))
	}
	n.metrics.applied.Set(float64(n.applied))
	n.publishApplied(n.applied)
	return nil
}

// applyConfChange decides a membership change against the member table
// (refusals become no-ops on every member alike), hands it to raft, and
// updates the transport's peers.
func (n *Node) applyConfChange(e *raftpb.Entry) error {
	cc, cctx, err := n.decodeConfChange(e)
	if err != nil {
		return err
	}
	refused := n.members.apply(&cc, cctx.Member)
	cs := n.rn.ApplyConfChange(cc)
	n.confState = *cs
	n.syncPeers()
	n.publishMembers()
	if refused != "" {
		n.log.Warn("raft: membership change refused", "index", e.Index, "reason", refused)
		n.finish(cctx.ReqID, proposalResult{err: fmt.Errorf("%w: %s", ErrRefused, refused)})
	} else {
		n.log.Info("raft: membership changed", "index", e.Index, "change", raftpb.ConfChangesToString(cc.Changes))
		n.finish(cctx.ReqID, proposalResult{})
	}
	if n.members.removed[n.id] {
		return ErrRemoved
	}
	return nil
}

// decodeConfChange decodes a conf-change entry; one with an unreadable
// context is turned into a no-op.
func (n *Node) decodeConfChange(e *raftpb.Entry) (raftpb.ConfChangeV2, confContext, error) {
	var cc raftpb.ConfChangeV2
	var cctx confContext
	if e.Type == raftpb.EntryConfChange {
		var v1 raftpb.ConfChange
		if err := v1.Unmarshal(e.Data); err != nil {
			return cc, cctx, fmt.Errorf("raft: decode conf change at %d: %w", e.Index, err)
		}
		cc = v1.AsV2()
	} else if err := cc.Unmarshal(e.Data); err != nil {
		return cc, cctx, fmt.Errorf("raft: decode conf change at %d: %w", e.Index, err)
	}
	if len(cc.Context) > 0 {
		if err := json.Unmarshal(cc.Context, &cctx); err != nil {
			n.log.Warn("raft: conf change with unreadable context; refusing it", "index", e.Index, "err", err)
			for i := range cc.Changes {
				cc.Changes[i].NodeID = 0
			}
		}
	}
	return cc, cctx, nil
}

// syncPeers makes the transport's peer set match the member table.
func (n *Node) syncPeers() {
	for _, m := range n.members.list() {
		if m.ID != n.id {
			n.tr.AddPeer(m.ID, m.RaftAddr)
		}
	}
	for id := range n.members.removed {
		n.tr.RemovePeer(id)
	}
}

func (n *Node) publishMembers() {
	list := n.members.list()
	n.statusMu.Lock()
	n.memberList = list
	n.statusMu.Unlock()
}

// maybeSnapshot takes a snapshot once enough has been applied since the
// last one: SnapshotEntries entries, or more entry bytes than
// SnapshotBytes or CatchUpBytes. One kept in memory costs a copy-on-write
// clone of the store and lets the log before it go, so the catch-up bound
// also bounds what is applied between two: the in-memory log holds at most
// about twice CatchUpBytes.
func (n *Node) maybeSnapshot() {
	if n.snapInFlight || n.applied <= n.snapIndex {
		return
	}
	if n.applied-n.snapIndex < n.cfg.SnapshotEntries && n.bytesSince < min(n.cfg.SnapshotBytes, n.cfg.CatchUpBytes) {
		return
	}
	n.startSnapshot()
}

// toFile reports whether a snapshot taken now goes to a file as well as
// to memory (see Config.SnapshotFileRatio).
func (n *Node) toFile() bool {
	return n.applied-n.fileIndex >= n.cfg.SnapshotEntries ||
		n.fileBytes >= max(n.cfg.SnapshotBytes, n.cfg.SnapshotFileRatio*n.lastFileSize)
}

// snapshotTaken is a snapshot for finishSnapshot: the state frozen at its
// index and, if it went to a file, its encoded size.
type snapshotTaken struct {
	meta     raftpb.SnapshotMetadata
	frozen   *kv.Frozen
	members  []byte
	file     bool
	size     uint64 // bytes of the file
	start    time.Time
	encoding time.Duration
}

// startSnapshot freezes the state at the applied index (cheap: the B-tree
// is cloned copy-on-write). Memory keeps the frozen state, not its
// encoding (see logStorage); a snapshot that goes to a file is encoded
// and written on another goroutine, so the Ready loop never waits for a
// large snapshot.
func (n *Node) startSnapshot() {
	index := n.applied
	term, err := n.storage.Term(index)
	if err != nil {
		n.log.Warn("raft: snapshot skipped", "index", index, "err", err)
		return
	}
	members, err := n.members.marshal()
	if err != nil {
		n.log.Warn("raft: snapshot skipped", "index", index, "err", err)
		return
	}
	var cs raftpb.ConfState
	if err := cs.Unmarshal(mustMarshal(&n.confState)); err != nil {
		n.log.Warn("raft: snapshot skipped", "index", index, "err", err)
		return
	}
	t := snapshotTaken{meta: raftpb.SnapshotMetadata{Index: index, Term: term, ConfState: cs},
		frozen: n.kv.Freeze(), members: members, file: n.toFile(), start: time.Now()}
	n.bytesSince = 0
	if !t.file {
		n.finishSnapshot(t, nil)
		return
	}
	n.snapInFlight, n.fileBytes = true, 0
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		kvData, err := t.frozen.Encode()
		if err == nil {
			snap := raftpb.Snapshot{Metadata: t.meta, Data: encodeSnapshot(t.members, kvData)}
			t.size = uint64(len(snap.Data))
			err = n.snaps.Save(snap)
		}
		t.encoding = time.Since(t.start)
		n.control(func() { n.finishSnapshot(t, err) })
	}()
}

// catchUpCompaction is the index up to which the in-memory log goes once
// a snapshot at index is written: behind it stay CatchUpEntries entries
// for slow followers, at most, and CatchUpBytes of them, at most. 0:
// nothing to drop.
func (n *Node) catchUpCompaction(index uint64) uint64 {
	var upTo uint64
	if index > n.cfg.CatchUpEntries {
		upTo = index - n.cfg.CatchUpEntries
	}
	first, err := n.storage.FirstIndex()
	if err != nil || first > index {
		return upTo
	}
	ents, err := n.storage.Entries(max(first, upTo+1), index+1, math.MaxUint64)
	if err != nil {
		return upTo
	}
	var size uint64
	for i := len(ents) - 1; i >= 0; i-- {
		if size += uint64(ents[i].Size()); size > n.cfg.CatchUpBytes {
			return max(upTo, ents[i].Index)
		}
	}
	return upTo
}

// finishSnapshot makes a snapshot taken the newest in memory and compacts
// the in-memory log; a snapshot written to a file is also recorded in the
// WAL, and WAL segments and old snapshot files are released.
func (n *Node) finishSnapshot(t snapshotTaken, err error) {
	if t.file {
		n.snapInFlight = false
	}
	index := t.meta.Index
	if err != nil {
		n.fail(fmt.Errorf("raft: snapshot at %d: %w", index, err))
		return
	}
	if index <= n.snapIndex {
		return // a newer snapshot arrived from the leader meanwhile
	}
	if err := n.storage.createSnapshot(index, &t.meta.ConfState, t.frozen, t.members); err != nil {
		if errors.Is(err, etcdraft.ErrSnapOutOfDate) {
			return
		}
		n.fail(fmt.Errorf("raft: snapshot at %d: %w", index, err))
		return
	}
	if t.file {
		if err := n.wal.SaveSnapshot(t.meta); err != nil {
			n.fail(fmt.Errorf("raft: snapshot at %d: %w", index, err))
			return
		}
		n.fileIndex, n.lastFileSize = index, t.size
		n.metrics.snapshotFileBytes.Add(float64(t.size))
	}
	n.snapIndex = index
	if upTo := n.catchUpCompaction(index); upTo > 0 {
		if err := n.storage.Compact(upTo); err != nil && !errors.Is(err, etcdraft.ErrCompacted) {
			n.fail(fmt.Errorf("raft: compact log: %w", err))
			return
		}
	}
	n.metrics.snapshots.Inc()
	if !t.file {
		n.log.Debug("raft: snapshot taken in memory", "index", index, "file_index", n.fileIndex)
		return
	}
	if err := n.wal.ReleaseTo(index); err != nil {
		n.fail(fmt.Errorf("raft: release WAL: %w", err))
		return
	}
	if err := n.snaps.Purge(2); err != nil {
		n.log.Warn("raft: purge old snapshots", "err", err)
	}
	n.log.Info("raft: snapshot taken", "index", index, "bytes", t.size, "took", t.encoding)
}

// freshenSnapshots replaces each snapshot sent to a member it does not
// name (a member added after the newest snapshot, which raft's receiver
// ignores: "not in the ConfState") by the state at the applied index, as
// etcd sends a merged snapshot. A member added to a restored cluster, whose
// one snapshot names only its first member, needs this; so does any member
// added after the log was compacted and before the next snapshot.
func (n *Node) freshenSnapshots(msgs []raftpb.Message) {
	for i := range msgs {
		m := &msgs[i]
		if m.Type != raftpb.MsgSnap || m.Snapshot == nil || inConf(m.Snapshot.Metadata.ConfState, m.To) {
			continue
		}
		term, err := n.storage.Term(n.applied)
		if err != nil {
			n.log.Warn("raft: no fresh snapshot for a new member", "to", fmt.Sprintf("%x", m.To), "err", err)
			continue
		}
		members, err := n.members.marshal()
		if err != nil {
			n.log.Warn("raft: no fresh snapshot for a new member", "to", fmt.Sprintf("%x", m.To), "err", err)
			continue
		}
		kvData, err := n.kv.Snapshot()
		if err != nil {
			n.log.Warn("raft: no fresh snapshot for a new member", "to", fmt.Sprintf("%x", m.To), "err", err)
			continue
		}
		var cs raftpb.ConfState
		if err := cs.Unmarshal(mustMarshal(&n.confState)); err != nil {
			n.log.Warn("raft: no fresh snapshot for a new member", "to", fmt.Sprintf("%x", m.To), "err", err)
			continue
		}
		m.Snapshot = &raftpb.Snapshot{Data: encodeSnapshot(members, kvData),
			Metadata: raftpb.SnapshotMetadata{Index: n.applied, Term: term, ConfState: cs}}
		n.log.Info("raft: sending the state at the applied index to a member added after the newest snapshot",
			"to", fmt.Sprintf("%x", m.To), "index", n.applied, "bytes", len(m.Snapshot.Data))
	}
}

// inConf reports whether id is a voter or learner of cs.
func inConf(cs raftpb.ConfState, id uint64) bool {
	return slices.Contains(cs.Voters, id) || slices.Contains(cs.Learners, id) ||
		slices.Contains(cs.VotersOutgoing, id) || slices.Contains(cs.LearnersNext, id)
}

func mustMarshal(cs *raftpb.ConfState) []byte {
	b, err := cs.Marshal()
	if err != nil {
		panic("raft: marshal ConfState: " + err.Error())
	}
	return b
}

// shutdown fails every waiter and closes the WAL; it runs as the loop exits.
func (n *Node) shutdown() {
	err := n.doneErr()
	for id := range n.pending {
		n.finish(id, proposalResult{err: err})
	}
	n.reads.failAll(err)
	n.bg.Wait() // a snapshot being written finishes before the WAL closes
	if cerr := n.wal.Close(); cerr != nil {
		n.log.Warn("raft: close WAL", "err", cerr)
	}
}
