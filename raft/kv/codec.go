package kv

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// requestVersion is the first byte of every encoded Request.
const requestVersion = 1

// minOpBytes is the smallest encoding of one op: type, key length 1, one key
// byte, IfModRev. Used to bound the op count by the input length.
const minOpBytes = 4

// Marshal encodes r in the compact binary format described in the package
// documentation. The Value of a delete op is not encoded. Marshal does not
// validate; UnmarshalRequest (and so Apply) rejects what it cannot accept.
func (r *Request) Marshal() []byte {
	n := 1 + 8 + uvarintLen(uint64(len(r.Ops)))
	for i := range r.Ops {
		op := &r.Ops[i]
		n += 1 + uvarintLen(uint64(len(op.Key))) + len(op.Key) + uvarintLen(uint64(op.IfModRev+1))
		if op.Type == OpPut {
			n += uvarintLen(uint64(len(op.Value))) + len(op.Value)
		}
	}
	b := make([]byte, 0, n)
	b = append(b, requestVersion)
	b = binary.LittleEndian.AppendUint64(b, r.ID)
	b = binary.AppendUvarint(b, uint64(len(r.Ops)))
	for i := range r.Ops {
		op := &r.Ops[i]
		b = append(b, byte(op.Type))
		b = appendString(b, op.Key)
		b = binary.AppendUvarint(b, uint64(op.IfModRev+1))
		if op.Type == OpPut {
			b = appendBytes(b, op.Value)
		}
	}
	return b
}

// UnmarshalRequest decodes a Request encoded by Marshal. The result does
// not alias b. Errors wrap ErrMalformed and name the offset.
func UnmarshalRequest(b []byte) (*Request, error) {
	d := decoder{b: b}
	if v := d.byte("version"); d.err == nil && v != requestVersion {
		d.failf("unsupported request format version %d (this build reads %d; upgrade isle on this member)", v, requestVersion)
	}
	r := &Request{ID: d.fixed64("request ID")}
	n := d.count("op count", minOpBytes)
	if d.err == nil && n > 0 {
		r.Ops = make([]Op, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		op := &r.Ops[i]
		op.Type = OpType(d.byte("op type"))
		if d.err == nil && op.Type != OpPut && op.Type != OpDelete {
			d.failf("op %d: unknown op type %d", i, op.Type)
		}
		key := d.bytes("key")
		if d.err == nil && len(key) == 0 {
			d.failf("op %d: empty key", i)
		}
		op.Key = string(key)
		op.IfModRev = int64(d.uvarintMax("IfModRev", math.MaxInt64)) - 1
		if op.Type == OpPut {
			if v := d.bytes("value"); len(v) > 0 {
				op.Value = append([]byte(nil), v...)
			}
		}
	}
	d.end()
	if d.err != nil {
		return nil, fmt.Errorf("kv: unmarshal request: %w", d.err)
	}
	return r, nil
}

// decoder reads the varint-based formats. The first error sticks; after it
// every read returns a zero value, so callers check err once per loop turn.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) failf(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("offset %d: %s: %w", d.off, fmt.Sprintf(format, args...), ErrMalformed)
	}
}

func (d *decoder) remaining() int { return len(d.b) - d.off }

func (d *decoder) byte(what string) byte {
	if d.err != nil {
		return 0
	}
	if d.remaining() < 1 {
		d.failf("%s: unexpected end of data", what)
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *decoder) fixed64(what string) uint64 {
	if d.err != nil {
		return 0
	}
	if d.remaining() < 8 {
		d.failf("%s: unexpected end of data", what)
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

// uvarint reads a canonical (shortest form) unsigned varint.
func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	switch {
	case n == 0:
		d.failf("%s: unexpected end of data", what)
		return 0
	case n < 0:
		d.failf("%s: varint overflows 64 bits", what)
		return 0
	case n != uvarintLen(v):
		d.failf("%s: non-canonical varint", what)
		return 0
	}
	d.off += n
	return v
}

// uvarintMax reads a uvarint and fails if it exceeds max.
func (d *decoder) uvarintMax(what string, max uint64) uint64 {
	v := d.uvarint(what)
	if d.err == nil && v > max {
		d.failf("%s: %d out of range (max %d)", what, v, max)
		return 0
	}
	return v
}

// int64 reads a non-negative int64 stored as a uvarint.
func (d *decoder) int64(what string) int64 {
	return int64(d.uvarintMax(what, math.MaxInt64))
}

// count reads an element count and checks that the remaining input can hold
// that many elements of at least minSize bytes each, so a hostile count
// cannot trigger a huge allocation.
func (d *decoder) count(what string, minSize int) int {
	v := d.uvarint(what)
	if d.err != nil {
		return 0
	}
	if v > uint64(d.remaining()/minSize) {
		d.failf("%s %d exceeds what the remaining %d bytes can hold", what, v, d.remaining())
		return 0
	}
	return int(v)
}

// bytes reads a length-prefixed byte string; the result aliases the input.
func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(d.remaining()) {
		d.failf("%s length %d exceeds remaining %d bytes", what, n, d.remaining())
		return nil
	}
	v := d.b[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return v
}

// end fails if input is left over.
func (d *decoder) end() {
	if d.err == nil && d.remaining() != 0 {
		d.failf("%d trailing bytes", d.remaining())
	}
}

func uvarintLen(v uint64) int {
	return (bits.Len64(v|1) + 6) / 7
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendString(b []byte, v string) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}
