package snap

import (
	"errors"
	"fmt"
)

var (
	// ErrNotFound is wrapped by Load when the snapshot file does not exist.
	ErrNotFound = errors.New("snap: snapshot file not found")
	// ErrCorrupt is matched (errors.Is) by every *CorruptError.
	ErrCorrupt = errors.New("snap: corrupt snapshot file")
)

// CorruptError reports a damaged snapshot file.
type CorruptError struct {
	File   string // path of the snapshot file
	Offset int64  // byte offset of the damaged region
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("snap: corrupt snapshot %s at offset %d: %s; remove the file and let the member "+
		"receive a snapshot from the leader, or restore it from a backup", e.File, e.Offset, e.Reason)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }
