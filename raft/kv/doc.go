// Package kv is the replicated state machine of isle: a deterministic,
// in-memory, revisioned key/value store that a Raft node applies committed
// entries to (the role etcd's MVCC store plays for Kubernetes).
//
// # Contract
//
// State: a sorted set of keys, each with its current value and three
// counters (CreateRevision, ModRevision, Version), the store revision, a
// bounded table of applied request IDs, and a bounded in-memory event
// history used to serve watches. Only current values are kept; older
// versions of a key live on only as events in the history.
//
// Apply: one committed Raft entry carries one encoded [Request], an atomic
// transaction of put/delete operations with optional per-op preconditions
// on the key's ModRevision. Apply is deterministic: the same sequence of
// entries produces the same state, results and snapshot bytes on every
// member. It uses no clocks, no randomness and never lets map iteration
// order influence results or snapshots. Rules:
//
//   - A transaction whose preconditions all hold bumps the revision by
//     exactly one (even if it changes nothing, e.g. it has no ops or only
//     deletes absent keys); all its ops share that revision. A failed
//     transaction changes nothing and reports the index of the first failed
//     precondition.
//   - Ops are evaluated and applied in order; an op sees the effects of the
//     earlier ops of the same transaction (including in its precondition).
//   - Version counts puts since the key was created; a delete removes the
//     key, so a later put re-creates it with Version 1.
//   - A request with a non-zero ID that was applied before (within the last
//     Options.DedupLimit IDs, first in first out) is not applied again;
//     Apply returns the remembered result, marked Duplicate. To keep memory
//     and snapshots small the remembered result keeps the metadata of Prev
//     and Current but not their values. ID 0 disables deduplication.
//   - Bytes that do not decode as a Request change nothing and yield
//     Result{Succeeded: false, FailedOp: -1}.
//
// Reads (Get, List, Count, Revision) may run concurrently with Apply and
// with each other. Returned KeyValue.Value slices are shared with the store
// and with watch events: callers must treat them as read-only.
//
// Watch: a [Watcher] delivers, in revision order, one batch per revision
// containing the events of that revision under its prefix. Apply never
// blocks on watchers: each watcher has a small queue of batches; a watcher
// whose queue overflows (or that starts in the past) reads from the event
// history instead, and if the history no longer covers the revisions it
// still needs, it ends with [ErrCompacted]. The history keeps the newest
// events within Options.HistoryLimit events and Options.HistoryBytes bytes
// of keys and values (whole revisions only); CompactRevision is the oldest
// revision a watch may start after.
//
// Snapshot/Restore: a snapshot holds the revision, all keys and the dedup
// table (not the event history). Restore replaces the whole state, restarts
// the history at the snapshot revision and ends every open watcher with
// ErrCompacted. Snapshot after Restore yields the same bytes.
//
// # Encodings
//
// Requests and snapshots use a compact binary format built from
// encoding/binary unsigned varints. The first byte is a format version.
// Decoders check every length against the remaining input, accept only
// canonical (shortest) varints and reject trailing bytes, so a value has
// exactly one encoding; they return errors wrapping [ErrMalformed] and never
// panic. Snapshots end with a CRC-32C of everything before it.
//
// Request (version 1):
//
//	0x01 | ID: 8 bytes little endian | uvarint op count | ops...
//	op:  type byte (1 put, 2 delete) | uvarint key length | key |
//	     uvarint IfModRev+1 | put only: uvarint value length | value
//
// Snapshot (version 1):
//
//	0x01 | uvarint revision | uvarint compact revision | uvarint key count |
//	keys in ascending order: key | value | create | mod | version |
//	uvarint dedup count | dedup entries oldest first | CRC-32C (4 bytes LE)
//
// # Linearizability checking
//
// [PorcupineModel] is a model for github.com/anishathalye/porcupine of a
// single register per key (get, put, delete, compare-and-swap on the value),
// partitioned by key, for checking client-observed histories in cluster
// tests.
package kv
