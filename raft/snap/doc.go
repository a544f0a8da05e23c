// Package snap stores Raft snapshots of an isle member as files.
//
// # Contract
//
//   - Save writes "%016x-%016x.snap" (term, index) atomically: a temporary file
//     is written and fsynced, renamed into place, and the directory is fsynced.
//     A crash leaves either the old state or the complete new file (plus,
//     possibly, a leftover ".tmp" file that Purge removes).
//   - Load returns exactly the snapshot named by the metadata. A missing file
//     is an error wrapping ErrNotFound that names the file; damage is a
//     *CorruptError naming the file and the offset of the damaged region
//     (errors.Is(err, ErrCorrupt)).
//   - Purge keeps the newest files (by index, then term) and removes the rest.
//
// # File format
//
//	offset  0: magic "ISNP"
//	offset  4: uint32 LE format version (1)
//	offset  8: uint64 LE payload length n
//	offset 16: uint32 LE chunk size c (65536)
//	offset 20: uint32 LE CRC32-C of bytes 0..19
//	offset 24: payload: the marshalled raftpb.Snapshot (n bytes)
//	then:      one uint32 LE CRC32-C per c-byte chunk of the payload, the
//	           last chunk possibly shorter; each CRC also covers the chunk's
//	           number (uint64 LE) so chunks cannot be swapped unnoticed.
//
// Per-chunk checksums let Load name the offset of a damaged region instead of
// only the file.
package snap
