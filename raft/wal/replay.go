package wal

import (
	"fmt"
	"os"
	"path/filepath"

	"go.etcd.io/raft/v3/raftpb"
)

// tracker follows the index bookkeeping that both replay and the writer
// apply, so that a gap is judged the same way when writing and reading.
type tracker struct {
	last     uint64 // index of the last entry, or of a snapshot marker beyond it
	haveLast bool   // false until the first entry was seen
}

// entryOK reports whether an entry with index i may follow (no gap).
func (t *tracker) entryOK(i uint64) bool { return !t.haveLast || i <= t.last+1 }

func (t *tracker) entry(i uint64) { t.last, t.haveLast = i, true }

func (t *tracker) marker(i uint64) {
	if t.haveLast && i > t.last {
		t.last = i
	}
}

// nextFirst is the first index to put in a new segment's name.
func (t *tracker) nextFirst() uint64 {
	if !t.haveLast {
		return 0
	}
	return t.last + 1
}

// replayed is what replay found in a WAL directory.
type replayed struct {
	hs          raftpb.HardState
	snap        raftpb.SnapshotMetadata
	haveMarker  bool
	markers     []uint64 // distinct snapshot marker indexes, ascending
	ents        []raftpb.Entry
	entsFile    string // where ents[0] was read, for error reports
	entsOff     int64
	tr          tracker
	segs        []segment
	lastValid   int64  // bytes of valid records in the last segment
	lastSize    int64  // actual size of the last segment
	lastReason  string // why the tail of the last segment is bad, if it is
	lastRecords int    // valid records in the last segment
	lastSealed  bool   // the last segment ends with a seal record
}

func corruptAt(file string, off int, reason string) *CorruptError {
	return &CorruptError{File: file, Offset: int64(off), Reason: reason}
}

// replay reads and verifies every segment in segs (sorted, non-empty).
func replay(dir string, segs []segment) (*replayed, error) {
	r := &replayed{segs: segs}
	for i, s := range segs {
		path := filepath.Join(dir, s.name())
		if i > 0 && s.seq != segs[i-1].seq+1 {
			return nil, corruptAt(path, 0, fmt.Sprintf(
				"segment sequence gap: expected sequence %d after %s, found %d (a segment file is missing)",
				segs[i-1].seq+1, segs[i-1].name(), s.seq))
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("wal: read segment %s: %w", path, err)
		}
		if err := r.segment(path, s, data, i == len(segs)-1); err != nil {
			return nil, err
		}
	}
	// Keep only the entries after the newest snapshot marker.
	k := 0
	for k < len(r.ents) && r.ents[k].Index <= r.snap.Index {
		k++
	}
	r.ents = r.ents[k:]
	if len(r.ents) > 0 && r.ents[0].Index > r.snap.Index+1 {
		return nil, &CorruptError{File: r.entsFile, Offset: r.entsOff, Reason: fmt.Sprintf(
			"entries start at index %d but the newest snapshot marker is at index %d: "+
				"entries in between are missing (was an older segment removed?)", r.ents[0].Index, r.snap.Index)}
	}
	return r, nil
}

// segment replays one segment's data.
func (r *replayed) segment(path string, s segment, data []byte, isLast bool) error {
	off, records, sealed := 0, 0, false
	scratch := new(crcPrefix)
	for off < len(data) {
		typ, payload, size, reason := decodeRecordScratch(scratch, data, off, s.seq)
		if reason != "" {
			if !isLast {
				return corruptAt(path, off, reason+" in a segment that is not the last one")
			}
			if y := nextValidRecord(data, off, s.seq); y >= 0 {
				return corruptAt(path, off, fmt.Sprintf("%s, but a valid record follows at offset %d", reason, y))
			}
			r.lastReason = reason // torn tail: the caller truncates it
			break
		}
		if sealed {
			return corruptAt(path, off, "record after the segment's seal record")
		}
		if reason := r.apply(typ, payload, path, off); reason != "" {
			return corruptAt(path, off, reason)
		}
		sealed = typ == typeSeal
		off += size
		records++
	}
	if !isLast && !sealed {
		return corruptAt(path, len(data), "segment ends without a seal record although a newer segment exists "+
			"(the file was truncated)")
	}
	if isLast {
		r.lastValid, r.lastSize, r.lastRecords, r.lastSealed = int64(off), int64(len(data)), records, sealed
	}
	return nil
}

// apply applies one valid record to the replay state; it returns a reason if
// the record is inconsistent with what came before.
func (r *replayed) apply(typ uint32, payload []byte, path string, off int) string {
	switch typ {
	case typeEntry:
		var e raftpb.Entry
		if err := e.Unmarshal(payload); err != nil {
			return fmt.Sprintf("undecodable entry record: %v", err)
		}
		if !r.tr.entryOK(e.Index) {
			return fmt.Sprintf("entry index gap: entry %d follows index %d", e.Index, r.tr.last)
		}
		if n := len(r.ents); n > 0 && e.Index <= r.ents[n-1].Index {
			// An entry with index i replaces all entries >= i.
			if e.Index <= r.ents[0].Index {
				r.ents = r.ents[:0]
			} else {
				r.ents = r.ents[:int(e.Index-r.ents[0].Index)]
			}
		}
		if len(r.ents) == 0 {
			r.entsFile, r.entsOff = path, int64(off)
		}
		r.ents = append(r.ents, e)
		r.tr.entry(e.Index)
	case typeHardState:
		var hs raftpb.HardState
		if err := hs.Unmarshal(payload); err != nil {
			return fmt.Sprintf("undecodable hard state record: %v", err)
		}
		r.hs = hs
	case typeSnapshot:
		var m raftpb.SnapshotMetadata
		if err := m.Unmarshal(payload); err != nil {
			return fmt.Sprintf("undecodable snapshot marker record: %v", err)
		}
		if r.haveMarker && m.Index < r.snap.Index {
			return fmt.Sprintf("snapshot marker at index %d is older than the previous marker at index %d",
				m.Index, r.snap.Index)
		}
		r.snap, r.haveMarker = m, true
		if n := len(r.markers); n == 0 || r.markers[n-1] != m.Index {
			r.markers = append(r.markers, m.Index)
		}
		// Entries up to the marker are covered by the snapshot.
		k := 0
		for k < len(r.ents) && r.ents[k].Index <= m.Index {
			k++
		}
		if k > 0 {
			r.ents = append([]raftpb.Entry(nil), r.ents[k:]...)
		}
		r.tr.marker(m.Index)
	case typeSeal, typePad:
	}
	return ""
}
