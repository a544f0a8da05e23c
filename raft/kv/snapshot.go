package kv

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/google/btree"
)

// snapshotVersion is the first byte of every snapshot.
const snapshotVersion = 1

// Minimal encoded sizes, to bound element counts by the input length.
const (
	minKeyBytes   = 6  // key length, key byte, value length, three counters
	minDedupBytes = 12 // ID, revision, flags, failed op, prev count
)

// Dedup entry flags.
const (
	dedupSucceeded  = 1 << 0
	dedupHasCurrent = 1 << 1
	dedupKnownFlags = dedupSucceeded | dedupHasCurrent
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Frozen is a point-in-time copy of the store's state that can be encoded
// while the store goes on applying: the B-tree is cloned copy-on-write, so
// freezing costs little whatever the store's size.
type Frozen struct {
	rev   int64
	tree  *btree.BTreeG[entry]
	dedup []dedupEntry // oldest first
}

// Freeze returns the current state for a later Encode. Call it from the
// goroutine that applies (the clone must not race with a write).
func (s *Store) Freeze() *Frozen {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &Frozen{rev: s.rev, tree: s.tree.Clone(), dedup: make([]dedupEntry, 0, s.dedup.n)}
	s.dedup.each(func(e *dedupEntry) { f.dedup = append(f.dedup, *e) })
	return f
}

// Revision returns the store revision the frozen state is at.
func (f *Frozen) Revision() int64 { return f.rev }

// Snapshot encodes the revision, all keys and the dedup table (see the
// package documentation for the format). The event history is not part of
// it. Encoding the same state always yields the same bytes.
func (s *Store) Snapshot() ([]byte, error) { return s.Freeze().Encode() }

// Encode encodes the frozen state as Snapshot does. It may run on any
// goroutine, concurrently with the store.
func (f *Frozen) Encode() ([]byte, error) {
	each := func(fn func(e *dedupEntry)) {
		for i := range f.dedup {
			fn(&f.dedup[i])
		}
	}
	size := 1 + 2*uvarintLen(uint64(f.rev)) + uvarintLen(uint64(f.tree.Len())) + uvarintLen(uint64(len(f.dedup))) + 4
	f.tree.Ascend(func(e entry) bool {
		size += uvarintLen(uint64(len(e.key))) + len(e.key) + uvarintLen(uint64(len(e.value))) + len(e.value) +
			uvarintLen(uint64(e.create)) + uvarintLen(uint64(e.mod)) + uvarintLen(uint64(e.version))
		return true
	})
	each(func(e *dedupEntry) {
		size += 8 + uvarintLen(uint64(e.rev)) + 1 + uvarintLen(uint64(int64(e.failedOp)+1)) + uvarintLen(uint64(len(e.prev)))
		for i := range e.prev {
			size++
			if e.prev[i].mod != 0 {
				size += metaLen(&e.prev[i])
			}
		}
		if e.current.mod != 0 {
			size += metaLen(&e.current)
		}
	})

	b := make([]byte, 0, size)
	b = append(b, snapshotVersion)
	b = binary.AppendUvarint(b, uint64(f.rev))
	b = binary.AppendUvarint(b, uint64(f.rev)) // compact revision: the history restarts here
	b = binary.AppendUvarint(b, uint64(f.tree.Len()))
	f.tree.Ascend(func(e entry) bool {
		b = appendString(b, e.key)
		b = appendBytes(b, e.value)
		b = binary.AppendUvarint(b, uint64(e.create))
		b = binary.AppendUvarint(b, uint64(e.mod))
		b = binary.AppendUvarint(b, uint64(e.version))
		return true
	})
	b = binary.AppendUvarint(b, uint64(len(f.dedup)))
	each(func(e *dedupEntry) {
		b = binary.LittleEndian.AppendUint64(b, e.id)
		b = binary.AppendUvarint(b, uint64(e.rev))
		var flags byte
		if e.succeeded {
			flags |= dedupSucceeded
		}
		if e.current.mod != 0 {
			flags |= dedupHasCurrent
		}
		b = append(b, flags)
		b = binary.AppendUvarint(b, uint64(int64(e.failedOp)+1))
		b = binary.AppendUvarint(b, uint64(len(e.prev)))
		for i := range e.prev {
			if e.prev[i].mod == 0 {
				b = append(b, 0)
				continue
			}
			b = append(b, 1)
			b = appendMeta(b, &e.prev[i])
		}
		if e.current.mod != 0 {
			b = appendMeta(b, &e.current)
		}
	})
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	if len(b) != size {
		return nil, fmt.Errorf("kv: snapshot: internal error: encoded %d bytes, computed %d", len(b), size)
	}
	return b, nil
}

func metaLen(m *kvMeta) int {
	return uvarintLen(uint64(len(m.key))) + len(m.key) + uvarintLen(uint64(m.create)) + uvarintLen(uint64(m.mod)) + uvarintLen(uint64(m.version))
}

func appendMeta(b []byte, m *kvMeta) []byte {
	b = appendString(b, m.key)
	b = binary.AppendUvarint(b, uint64(m.create))
	b = binary.AppendUvarint(b, uint64(m.mod))
	return binary.AppendUvarint(b, uint64(m.version))
}

// Restore replaces the whole state with a snapshot made by Snapshot. The
// event history restarts at the snapshot revision and every open watcher
// ends with ErrCompacted. Invalid data (errors wrap ErrMalformed) leaves the
// store unchanged. If the snapshot remembers more request IDs than
// Options.DedupLimit, the newest are kept.
func (s *Store) Restore(data []byte) error {
	st, err := decodeSnapshot(data, s.opts.DedupLimit)
	if err != nil {
		return fmt.Errorf("kv: restore snapshot: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tree = st.tree
	s.rev = st.rev
	s.dedup = st.dedup
	s.hist = newHistory(s.opts.HistoryLimit, s.opts.HistoryBytes, st.rev)
	s.endWatchersLocked(fmt.Errorf("kv: watch: store restored from a snapshot at revision %d: %w", st.rev, ErrCompacted))
	return nil
}

type snapshotState struct {
	rev   int64
	tree  *btree.BTreeG[entry]
	dedup *dedupTable
}

func decodeSnapshot(data []byte, dedupLimit int) (*snapshotState, error) {
	if len(data) < 5 {
		return nil, fmt.Errorf("%d bytes is too short for a snapshot: %w", len(data), ErrMalformed)
	}
	body := data[:len(data)-4]
	if want, got := binary.LittleEndian.Uint32(data[len(data)-4:]), crc32.Checksum(body, castagnoli); want != got {
		return nil, fmt.Errorf("checksum mismatch (stored %08x, computed %08x): %w", want, got, ErrMalformed)
	}
	d := decoder{b: body}
	if v := d.byte("version"); d.err == nil && v != snapshotVersion {
		d.failf("unsupported snapshot format version %d (this build reads %d; upgrade isle on this member)", v, snapshotVersion)
	}
	st := &snapshotState{tree: btree.NewG(btreeDegree, lessEntry)}
	st.rev = d.int64("revision")
	// The history is not in the snapshot, so it restarts at the revision.
	if compact := d.int64("compact revision"); d.err == nil && compact != st.rev {
		d.failf("compact revision %d differs from revision %d", compact, st.rev)
	}
	nkeys := d.count("key count", minKeyBytes)
	lastKey := ""
	for i := 0; i < nkeys && d.err == nil; i++ {
		var e entry
		key := d.bytes("key")
		val := d.bytes("value")
		e.create = d.int64("create revision")
		e.mod = d.int64("mod revision")
		e.version = d.int64("version")
		if d.err != nil {
			break
		}
		switch {
		case len(key) == 0:
			d.failf("key %d: empty key", i)
		case i > 0 && string(key) <= lastKey:
			d.failf("key %d: keys not in strictly ascending order", i)
		case e.create < 1 || e.create > e.mod || e.mod > st.rev || e.version < 1:
			d.failf("key %d: inconsistent revisions (create %d, mod %d, version %d, store revision %d)", i, e.create, e.mod, e.version, st.rev)
		}
		e.key = string(key)
		if len(val) > 0 {
			e.value = append([]byte(nil), val...)
		}
		st.tree.ReplaceOrInsert(e)
		lastKey = e.key
	}

	ndedup := d.count("dedup count", minDedupBytes)
	skip := 0
	if ndedup > dedupLimit {
		skip = ndedup - dedupLimit
	}
	st.dedup = newDedupTable(dedupLimit)
	seen := make(map[uint64]struct{}, ndedup)
	for i := 0; i < ndedup && d.err == nil; i++ {
		e := decodeDedupEntry(&d, st)
		if d.err != nil {
			break
		}
		if _, dup := seen[e.id]; dup {
			d.failf("dedup entry %d: request ID %016x repeated", i, e.id)
			break
		}
		seen[e.id] = struct{}{}
		if i >= skip {
			st.dedup.add(e)
		}
	}
	d.end()
	if d.err != nil {
		return nil, d.err
	}
	return st, nil
}

func decodeDedupEntry(d *decoder, st *snapshotState) dedupEntry {
	var e dedupEntry
	e.id = d.fixed64("request ID")
	e.rev = d.int64("result revision")
	flags := d.byte("result flags")
	failedOp := int64(d.uvarintMax("failed op", math.MaxInt32)) - 1
	nprev := d.count("prev count", 1)
	if d.err != nil {
		return e
	}
	e.succeeded = flags&dedupSucceeded != 0
	e.failedOp = int32(failedOp)
	switch {
	case e.id == 0:
		d.failf("request ID 0")
	case flags&^dedupKnownFlags != 0:
		d.failf("unknown result flags %#x", flags)
	case e.rev > st.rev:
		d.failf("result revision %d is after store revision %d", e.rev, st.rev)
	case e.succeeded && (failedOp != -1 || flags&dedupHasCurrent != 0):
		d.failf("successful result with a failed op or current value")
	case !e.succeeded && (failedOp < 0 || nprev != 0):
		d.failf("failed result without a failed op or with previous values")
	}
	if nprev > 0 {
		e.prev = make([]kvMeta, nprev)
	}
	for i := 0; i < nprev && d.err == nil; i++ {
		switch d.byte("prev presence") {
		case 0:
		case 1:
			e.prev[i] = decodeMeta(d, st, e.rev)
		default:
			d.failf("bad prev presence byte")
		}
	}
	if flags&dedupHasCurrent != 0 {
		e.current = decodeMeta(d, st, e.rev)
	}
	return e
}

func decodeMeta(d *decoder, st *snapshotState, maxRev int64) kvMeta {
	key := d.bytes("result key")
	m := kvMeta{create: d.int64("result create revision"), mod: d.int64("result mod revision"), version: d.int64("result version")}
	if d.err != nil {
		return kvMeta{}
	}
	if len(key) == 0 || m.create < 1 || m.create > m.mod || m.mod > maxRev || m.version < 1 {
		d.failf("inconsistent result key value")
		return kvMeta{}
	}
	// Share the key string with the tree when the key still exists.
	if e, ok := st.tree.Get(entry{key: string(key)}); ok {
		m.key = e.key
	} else {
		m.key = string(key)
	}
	return m
}
