// Package backup is the file format of isle's cluster backups: what
// `isle snapshot save` and the servers' scheduled snapshots write, and
// `isle snapshot restore` reads.
//
// A backup holds the store's key/value state at one revision (every
// object, the node credentials' hashes, the CA) and the cluster identity a
// restored server needs: the CA certificate and its key sealed with the
// cluster token's secret (pki.Seal), as the store itself keeps it. The
// state is encrypted with a key derived from the token's secret, so Secret
// values (and everything else) are unreadable without the token, and the
// restore needs the token, as the joins do: the restored cluster keeps its
// CA and token, so its boards' credentials and pinned CA still hold.
//
// # File format (version 1)
//
//	offset 0:    magic "ISLEBKUP"
//	offset 8:    uint32 LE format version (1)
//	offset 12:   uint32 LE header length h (at most 1 MiB)
//	offset 16:   the header, JSON (Header), h bytes
//	offset 16+h: uint32 LE CRC32-C of bytes 0 .. 16+h
//	then:        the sealed state, in chunks: chunk i is the i-th
//	             ChunkSize bytes of the state (the last one shorter)
//	             sealed with AES-256-GCM (16 bytes longer), followed by a
//	             uint32 LE CRC32-C of the chunk number (uint64 LE) and
//	             the sealed bytes
//
// The file ends after the last chunk's checksum: its exact length follows
// from the header (Size, ChunkSize), so a truncated file is named as such.
//
// The encryption key is HKDF-SHA256 of the token's secret with the
// header's random Salt and the info "isle backup v1 state"; KeyCheck is 16
// bytes of the same derivation with the info "isle backup v1 check", so a
// wrong token is told apart from damage. Chunk i's GCM nonce is 4 zero
// bytes and i as uint64 big-endian (the key is new in every file); its
// additional data is the SHA-256 of the header bytes and i (uint64 LE), so
// chunks cannot be moved, and the header not changed, unnoticed.
//
// # Checks
//
// Parse verifies the structure and every checksum without the token: a
// damaged file is a *CorruptError naming the file and the offset of the
// damaged bytes (errors.Is ErrCorrupt). Open then checks the token: one of
// another cluster (its CA hash differs) is ErrOtherCluster, the right CA
// with a wrong secret ErrWrongToken; a chunk that fails authentication
// although its checksum holds is a *CorruptError too (tampering).
package backup
