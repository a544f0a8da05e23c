package wal

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt is matched (errors.Is) by every *CorruptError.
	ErrCorrupt = errors.New("wal: corrupt")
	// ErrFailed is returned by every write after a write or sync failed. The
	// in-memory and on-disk states may disagree; close the WAL, stop the
	// member and reopen (which repairs the tail).
	ErrFailed = errors.New("wal: an earlier write failed; the WAL refuses writes until it is reopened")
	// ErrClosed is returned by methods called after Close.
	ErrClosed = errors.New("wal: closed")
	// ErrLocked is returned by Open when another WAL holds the directory.
	ErrLocked = errors.New("wal: directory is locked by another open WAL")
)

// CorruptError reports damage found while opening the WAL: data that is bad
// but is not a torn tail, so replaying past it could lose acknowledged
// writes.
type CorruptError struct {
	File   string // path of the segment file
	Offset int64  // byte offset of the bad record (or of the problem) in File
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("wal: corrupt segment %s at offset %d: %s; refusing to start because replaying "+
		"past this point could lose acknowledged writes: restore this member's data from a peer or a backup",
		e.File, e.Offset, e.Reason)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }
