package snap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

const (
	magic      = "ISNP"
	version    = 1
	headerSize = 24
	chunkSize  = 64 << 10
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// chunkCRC is the checksum of chunk number i.
func chunkCRC(i uint64, chunk []byte) uint32 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], i)
	return crc32.Update(crc32.Update(0, crcTable, b[:]), crcTable, chunk)
}

func numChunks(n uint64, size uint64) uint64 { return (n + size - 1) / size }

// encode returns the header and the checksum table for payload.
func encode(payload []byte) (header, table []byte) {
	header = make([]byte, headerSize)
	copy(header, magic)
	binary.LittleEndian.PutUint32(header[4:], version)
	binary.LittleEndian.PutUint64(header[8:], uint64(len(payload)))
	binary.LittleEndian.PutUint32(header[16:], chunkSize)
	binary.LittleEndian.PutUint32(header[20:], crc32.Checksum(header[:20], crcTable))
	n := numChunks(uint64(len(payload)), chunkSize)
	table = make([]byte, 0, 4*n)
	for i := uint64(0); i < n; i++ {
		start := i * chunkSize
		end := min(start+chunkSize, uint64(len(payload)))
		table = binary.LittleEndian.AppendUint32(table, chunkCRC(i, payload[start:end]))
	}
	return header, table
}

// verify checks a whole file and returns its payload (aliasing data).
func verify(path string, data []byte) ([]byte, error) {
	bad := func(off int64, format string, args ...any) error {
		return &CorruptError{File: path, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	size := uint64(len(data))
	if size < headerSize {
		return nil, bad(int64(size), "file of %d bytes is shorter than the %d-byte header", size, headerSize)
	}
	if !bytes.Equal(data[:4], []byte(magic)) {
		return nil, bad(0, "not a snapshot file (bad magic %q)", data[:4])
	}
	if got, want := crc32.Checksum(data[:20], crcTable), binary.LittleEndian.Uint32(data[20:]); got != want {
		return nil, bad(0, "header checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	if v := binary.LittleEndian.Uint32(data[4:]); v != version {
		return nil, bad(4, "unsupported format version %d (this build reads version %d)", v, version)
	}
	n := binary.LittleEndian.Uint64(data[8:])
	cs := uint64(binary.LittleEndian.Uint32(data[16:]))
	if cs == 0 {
		return nil, bad(16, "chunk size is zero")
	}
	if n > size-headerSize {
		return nil, bad(int64(size), "file is truncated: header announces %d payload bytes, %d present", n, size-headerSize)
	}
	chunks := numChunks(n, cs)
	if want := headerSize + n + 4*chunks; size != want {
		if size < want {
			return nil, bad(int64(size), "file is truncated: %d bytes, expected %d", size, want)
		}
		return nil, bad(int64(want), "%d unexpected bytes after the end of the snapshot", size-want)
	}
	payload := data[headerSize : headerSize+n]
	table := data[headerSize+n:]
	for i := uint64(0); i < chunks; i++ {
		start := i * cs
		end := min(start+cs, n)
		want := binary.LittleEndian.Uint32(table[4*i:])
		if got := chunkCRC(i, payload[start:end]); got != want {
			return nil, bad(int64(headerSize+start), "checksum mismatch in payload bytes %d..%d (stored %08x, computed %08x)",
				start, end, want, got)
		}
	}
	return payload, nil
}
