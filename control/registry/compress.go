package registry

import (
	"bytes"
	_ "embed"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Stored values are compressed: a Kubernetes object's JSON repeats the
// same field names, managers and values from object to object, and zstd
// with a dictionary of typical objects stores a pod of 4.4 KB in a few
// hundred bytes. That is what the store keeps in memory, what the Raft
// log and the WAL carry, and what a snapshot holds. A value is a zstd
// frame naming its dictionary, or JSON as it was stored before (read as
// is); Secrets, when the store encrypts them, are sealed instead.

// storedDictV1 is the dictionary of the values compressed with
// storedDictV1ID: JSON of typical objects (a Service, an EndpointSlice, a
// Deployment, a ReplicaSet, a Node, an Event, a Pod), the most common
// last. Values stored with it are read with it for good: it never
// changes (TestStoredDictionaryUnchanged); a better one gets a new ID
// beside it.
//
//go:embed storedict-v1.json
var storedDictV1 []byte

// storedDictV1ID is storedDictV1's ID in the frames: within zstd's range
// for private dictionaries (32,768 to 2^31-1), "isl1".
const storedDictV1ID = 0x69736c31

// compressMin is the smallest value worth compressing: a frame's header
// and checksum take what a shorter one would save.
const compressMin = 64

// zstdMagic opens every zstd frame; no JSON value starts with it.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// maxStoredJSON bounds what one stored value expands to: the largest
// object the store takes (MaxWriteBytes) and more, so a corrupt or hostile
// frame cannot make a read allocate without bound.
const maxStoredJSON = 4 * MaxWriteBytes

var coders = sync.OnceValues(func() (*zstd.Encoder, *zstd.Decoder) {
	// One encoder: writes go one at a time through Raft anyway, and each
	// encoder holds its own tables. A decoder per CPU: reads are the API's
	// hot path.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(1<<17), zstd.WithLowerEncoderMem(true), zstd.WithEncoderCRC(true),
		zstd.WithEncoderDictRaw(storedDictV1ID, storedDictV1))
	if err != nil {
		panic(fmt.Sprintf("registry: zstd encoder: %v", err)) // only bad options fail
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(maxStoredJSON), zstd.WithDecoderDictRaw(storedDictV1ID, storedDictV1))
	if err != nil {
		panic(fmt.Sprintf("registry: zstd decoder: %v", err))
	}
	return enc, dec
})

// compressValue is the value to store for the JSON data: compressed,
// unless that saves nothing.
func compressValue(data []byte) []byte {
	if len(data) < compressMin {
		return data
	}
	enc, _ := coders()
	c := enc.EncodeAll(data, make([]byte, 0, len(data)/2))
	if len(c) >= len(data) {
		return data
	}
	return bytes.Clone(c) // kept for as long as it is stored: no spare capacity
}

// StoredJSON is the JSON of a value the registry stored (not a sealed
// Secret): expanded if compressed, else the value itself.
func StoredJSON(value []byte) ([]byte, error) {
	if !bytes.HasPrefix(value, zstdMagic) {
		return value, nil
	}
	_, dec := coders()
	out, err := dec.DecodeAll(value, nil)
	if err != nil {
		return nil, fmt.Errorf("registry: stored value of %d bytes: %w", len(value), err)
	}
	return out, nil
}
