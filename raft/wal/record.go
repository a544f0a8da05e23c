package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
)

// Record types (the top 4 bits of a record's first header word).
const (
	typeEntry     = 1
	typeHardState = 2
	typeSnapshot  = 3
	typeSeal      = 4
	typePad       = 5 // since data format 2: zeros to the end of a page
)

const (
	headerSize = 8
	typeShift  = 28
	// maxPayload is the largest payload a record can carry (28-bit length).
	maxPayload = 1<<typeShift - 1
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// align8 rounds n up to a multiple of 8.
func align8(n int) int { return (n + 7) &^ 7 }

// recordSize is the number of bytes a record with an n-byte payload takes.
func recordSize(n int) int { return headerSize + align8(n) }

// crcPrefix is scratch space for the bytes that bind a record to its
// segment and position (kept off the stack: crc32.Update makes it escape).
type crcPrefix [20]byte

// recordCRC computes the checksum of a record: it binds the record to its
// segment (seq) and position (off) and covers the header word and payload.
func recordCRC(b *crcPrefix, seq uint64, off int64, word uint32, payload []byte) uint32 {
	binary.LittleEndian.PutUint64(b[0:], seq)
	binary.LittleEndian.PutUint64(b[8:], uint64(off))
	binary.LittleEndian.PutUint32(b[16:], word)
	return crc32.Update(crc32.Update(0, crcTable, b[:]), crcTable, payload)
}

// marshaler is implemented by the gogo-protobuf raftpb types.
type marshaler interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// zeros is a padding record's payload: n zero bytes.
type zeros int

func (z zeros) Size() int { return int(z) }

func (z zeros) MarshalToSizedBuffer(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// encoder appends records to a buffer destined for file offset base of
// segment seq.
type encoder struct {
	seq  uint64
	base int64
	buf  []byte
	crc  crcPrefix
}

func (e *encoder) reset(seq uint64, base int64) {
	e.seq, e.base, e.buf = seq, base, e.buf[:0]
}

// add appends a record of type typ whose payload is m (nil for no payload).
func (e *encoder) add(typ uint32, m marshaler) error {
	n := 0
	if m != nil {
		n = m.Size()
	}
	if n > maxPayload {
		return fmt.Errorf("record of %d bytes exceeds the limit of %d bytes", n, maxPayload)
	}
	start := len(e.buf)
	size := recordSize(n)
	e.buf = slices.Grow(e.buf, size)[:start+size]
	rec := e.buf[start:]
	payload := rec[headerSize : headerSize+n]
	if m != nil {
		if _, err := m.MarshalToSizedBuffer(payload); err != nil {
			e.buf = e.buf[:start]
			return fmt.Errorf("marshal record: %w", err)
		}
	}
	clear(rec[headerSize+n:]) // padding
	word := typ<<typeShift | uint32(n)
	binary.LittleEndian.PutUint32(rec[0:], word)
	binary.LittleEndian.PutUint32(rec[4:], recordCRC(&e.crc, e.seq, e.base+int64(start), word, payload))
	return nil
}

// decodeRecord decodes the record at data[off:] of segment seq. It returns
// the record's type, payload (aliasing data) and total size, or a non-empty
// reason why no valid record starts there.
func decodeRecord(data []byte, off int, seq uint64) (typ uint32, payload []byte, size int, reason string) {
	return decodeRecordScratch(new(crcPrefix), data, off, seq)
}

// decodeRecordScratch is decodeRecord with caller-provided scratch space.
func decodeRecordScratch(scratch *crcPrefix, data []byte, off int, seq uint64) (typ uint32, payload []byte, size int, reason string) {
	rest := len(data) - off
	if rest < headerSize {
		return 0, nil, 0, fmt.Sprintf("incomplete record header (%d of %d bytes)", rest, headerSize)
	}
	word := binary.LittleEndian.Uint32(data[off:])
	sum := binary.LittleEndian.Uint32(data[off+4:])
	typ = word >> typeShift
	n := int(word & maxPayload)
	switch {
	case typ < typeEntry || typ > typePad:
		return 0, nil, 0, fmt.Sprintf("invalid record type %d", typ)
	case typ == typeSeal && n != 0:
		return 0, nil, 0, fmt.Sprintf("seal record with %d-byte payload", n)
	}
	size = recordSize(n)
	if size > rest {
		return 0, nil, 0, fmt.Sprintf("record of %d bytes extends past the end of the file (%d bytes left)", size, rest)
	}
	payload = data[off+headerSize : off+headerSize+n]
	if got := recordCRC(scratch, seq, int64(off), word, payload); got != sum {
		return 0, nil, 0, fmt.Sprintf("checksum mismatch (stored %08x, computed %08x)", sum, got)
	}
	for _, b := range data[off+headerSize+n : off+size] {
		if b != 0 {
			return 0, nil, 0, "non-zero padding"
		}
	}
	return typ, payload, size, ""
}

// nextValidRecord returns the offset of the first valid record at an aligned
// offset after off, or -1 if there is none.
func nextValidRecord(data []byte, off int, seq uint64) int {
	scratch := new(crcPrefix)
	for y := off + headerSize; y+headerSize <= len(data); y += headerSize {
		if _, _, _, reason := decodeRecordScratch(scratch, data, y, seq); reason == "" {
			return y
		}
	}
	return -1
}
