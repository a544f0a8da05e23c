// Package raft is isle's replicated store: a Raft member built on
// go.etcd.io/raft/v3 with isle's own write-ahead log (raft/wal), snapshot
// files (raft/snap), TCP transport (raft/transport) and revisioned key/value
// state machine (raft/kv).
//
// # The Ready loop
//
// One goroutine owns the etcd RawNode and does all of its I/O, in this order:
//
//	for {
//		wait for a tick, an inbound message, proposals or a read request
//		feed them all to the RawNode (batching: one Ready for many proposals)
//		rd := rn.Ready()
//		if rd.Snapshot is set:   write the snapshot file (fsync)
//		wal.Save(rd.HardState, rd.Entries, rd.MustSync)  // fsync only if MustSync
//		if rd.Snapshot is set:   record it in the WAL, install it in memory and in the state machine
//		storage.Append(rd.Entries)
//		transport.Send(rd.Messages)                       // never blocks
//		apply rd.CommittedEntries to the state machine, wake their proposers
//		answer rd.ReadStates once applied
//		maybe take a snapshot and compact the log
//		rn.Advance(rd)
//	}
//
// Nothing is sent or applied before it is durable, and an idle member writes
// nothing: heartbeats change no persistent state.
//
// # Proposals
//
// Every write is a kv.Request with a random ID. The state machine remembers
// recent IDs, so a request re-proposed after a leader change (raft may drop a
// forwarded proposal silently) is applied at most once. Propose returns the
// result once the entry is applied locally, ErrNoLeader if raft never took
// the proposal, or ErrTimeout when the outcome is unknown (it was handed to
// raft but not seen applied before the deadline).
//
// # Reads
//
// Linearizable reads use raft's ReadIndex: concurrent readers share one
// ReadIndex round, then wait until the local state machine has applied that
// index. Stale reads go straight to the local state machine.
//
// # Membership
//
// A cluster starts with one member (Bootstrap). Others join as learners
// (AddLearner), catch up from the log or a snapshot, and are promoted to
// voters (Promote) once in sync. RemoveMember refuses a removal that would
// leave fewer active voters than a quorum. Member IDs are random 64-bit
// numbers and a removed ID is remembered forever and never accepted again.
// A member added after the newest snapshot, which that snapshot does not
// name, is sent the state at the applied index instead (as etcd's merged
// snapshots do), since raft would ignore the stale one.
//
// # Backups and recovery
//
// Backup freezes the state at one revision after a linearizable read
// (online, on any member). Bootstrap.Seed starts a new cluster from such a
// state: its first snapshot (index 1) names the new member alone.
// Bootstrap.ForceNewCluster turns a restarting member into the only voter
// of a new cluster with what it had committed: a snapshot at its commit
// index names it alone, every other member is removed, an empty entry of a
// new term drops what it had not seen committed, and the cluster ID
// changes. Both write the snapshot and the WAL before the member file.
package raft
