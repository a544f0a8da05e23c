package raft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// A state snapshot is the member table followed by the key/value store:
//
//	magic "isle-snap\x01" | uvarint len(members) | members (JSON) | kv snapshot
var snapMagic = []byte("isle-snap\x01")

func encodeSnapshot(mj, kvData []byte) []byte {
	out := make([]byte, 0, len(snapMagic)+binary.MaxVarintLen64+len(mj)+len(kvData))
	out = append(out, snapMagic...)
	out = binary.AppendUvarint(out, uint64(len(mj)))
	out = append(out, mj...)
	return append(out, kvData...)
}

func decodeSnapshot(b []byte) (*membership, []byte, error) {
	if !bytes.HasPrefix(b, snapMagic) {
		return nil, nil, errors.New("decode snapshot: not an isle state snapshot (bad magic)")
	}
	b = b[len(snapMagic):]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, errors.New("decode snapshot: member table length out of range")
	}
	ms, err := unmarshalMembership(b[k : k+int(n)])
	if err != nil {
		return nil, nil, fmt.Errorf("decode snapshot: %w", err)
	}
	return ms, b[k+int(n):], nil
}
