package kv

import (
	"encoding/binary"
	"fmt"
)

// PeekID returns the ID of an encoded Request without decoding the rest, so
// the node can match an applied entry to its waiting proposer cheaply.
func PeekID(b []byte) (uint64, error) {
	if len(b) < 9 || b[0] != requestVersion {
		return 0, fmt.Errorf("%w: not a request of format version %d", ErrMalformed, requestVersion)
	}
	return binary.LittleEndian.Uint64(b[1:9]), nil
}
