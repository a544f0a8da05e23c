// Package wal is the write-ahead log of an isle Raft member: it makes Raft's
// HardState, log entries and snapshot markers durable before they are
// acknowledged, and replays them on restart.
//
// # Contract
//
//   - Open verifies every record of every segment. A torn tail of the last
//     segment (a crash during an unsynced append) is truncated to the last good
//     record and logged; anything bad before the tail is reported as a
//     *CorruptError (errors.Is(err, ErrCorrupt)) naming the file and offset.
//     Nothing is ever dropped silently.
//   - Save(hs, ents, true) returns only after the records are on stable storage
//     (fdatasync). Save with sync=false only hands them to the kernel.
//   - After any failed write or sync (ENOSPC, EIO, ...) the WAL refuses further
//     writes with ErrFailed: the page cache state is unknown and the caller must
//     stop. Reopening repairs the tail.
//   - The WAL is written for SD cards: no preallocation, no write for an empty
//     Save, fsync only when asked (plus when cutting a segment, and in Close for
//     unsynced writes), directory fsync when files are created, renamed or
//     removed. Records are 8-byte aligned; a synced write is padded to the end
//     of its page when that takes no more bytes than the write itself, so that
//     the next synced write does not write that page again (the kernel writes
//     whole pages: a page rewritten by every sync costs a page each time).
//   - A WAL directory is locked (flock) while open; a second Open fails.
//
// # On-disk format
//
// A WAL directory holds segment files named "%016x-%016x.wal": the segment's
// sequence number and the index of the first entry expected in it (0 when not
// yet known). Sequence numbers are consecutive; a segment is created as a
// ".tmp" file, filled with its header records, synced and renamed into place.
//
// A segment is a sequence of records, each starting at an 8-byte aligned
// offset:
//
//	offset 0: uint32 little endian: type<<28 | payload length (< 256 MiB)
//	offset 4: uint32 little endian: CRC32-C (Castagnoli)
//	offset 8: payload, then zero padding to the next multiple of 8
//
// The CRC covers the segment's sequence number (uint64 LE), the record's file
// offset (uint64 LE), the first header word and the payload, so a record that
// is stale, moved or copied from another segment does not verify. Padding must
// be zero.
//
// Record types: 1 entry (raftpb.Entry), 2 HardState (raftpb.HardState),
// 3 snapshot marker (raftpb.SnapshotMetadata), 4 seal (empty payload),
// 5 padding (zeros; replay skips it). Padding records appeared with format
// 2 of the data directory (raft.DataFormat): a WAL without them (format 1)
// reads the same, and an isle that reads only format 1 refuses a format 2
// directory by its member file before it would misread one as corrupt.
// Every segment starts with the newest snapshot marker and, if one was saved,
// the current HardState, so each segment is self-contained for metadata.
// Before a new segment is created, the previous one gets a seal record and is
// synced; a segment other than the last must end with exactly one seal record,
// which detects a non-last segment truncated at a record boundary.
//
// Replay rules: an entry with index i replaces all entries >= i; an entry
// beyond last+1 is a gap (corruption); a snapshot marker beyond the last entry
// moves the expected next index past it. State.Entries holds the entries after
// the newest snapshot marker.
package wal
