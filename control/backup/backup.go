package backup

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"

	"github.com/isle-cluster/isle/control/wire"
)

const (
	magic         = "ISLEBKUP"
	version       = 1
	prefixLen     = 16 // magic, version, header length
	maxHeaderLen  = 1 << 20
	tagLen        = 16
	crcLen        = 4
	saltLen       = 16
	keyCheckLen   = 16
	infoState     = "isle backup v1 state"
	infoCheck     = "isle backup v1 check"
	chunkSize     = 1 << 20
	minChunkSize  = 1 << 10
	maxChunkSize  = 64 << 20
	keyLen        = 32
	nonceIndexOff = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors callers branch on.
var (
	// ErrCorrupt is matched (errors.Is) by every *CorruptError.
	ErrCorrupt = errors.New("backup: corrupt file")
	// ErrOtherCluster: the file is a backup of another cluster than the
	// token's.
	ErrOtherCluster = errors.New("backup: the file is of another cluster")
	// ErrWrongToken: the token has the file's CA but not its secret.
	ErrWrongToken = errors.New("backup: the token does not open the file")
)

// CorruptError reports a damaged backup file.
type CorruptError struct {
	File   string
	Offset int64 // of the damaged bytes
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("backup: %s is corrupt at offset %d: %s", e.File, e.Offset, e.Reason)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Header describes a backup; it is stored in clear.
type Header struct {
	// ClusterID is the store's cluster ID (hexadecimal), Member the name
	// of the server that wrote the file.
	ClusterID string `json:"clusterID"`
	Member    string `json:"member"`
	// Revision is the store revision the state is at, Index the store's
	// applied index then.
	Revision int64  `json:"revision"`
	Index    uint64 `json:"index"`
	// Created is when the state was taken.
	Created time.Time `json:"created"`
	// Servers are the names of the store's members then.
	Servers []string `json:"servers"`
	// CAHash is the CA's hash as tokens carry it; CACert its certificate
	// (PEM) and CAKeySealed its key sealed with the token's secret.
	CAHash      string `json:"caHash"`
	CACert      []byte `json:"caCert"`
	CAKeySealed []byte `json:"caKeySealed"`
	// Salt and KeyCheck: see the package documentation. Size is the state's
	// length in bytes, ChunkSize the length of its chunks.
	Salt      []byte `json:"salt"`
	KeyCheck  []byte `json:"keyCheck"`
	Size      int64  `json:"size"`
	ChunkSize int    `json:"chunkSize"`
}

func deriveKeys(secret string, salt []byte) (key, check []byte, err error) {
	if secret == "" {
		return nil, nil, errors.New("empty token secret")
	}
	if key, err = hkdf.Key(sha256.New, []byte(secret), salt, infoState, keyLen); err != nil {
		return nil, nil, err
	}
	if check, err = hkdf.Key(sha256.New, []byte(secret), salt, infoCheck, keyCheckLen); err != nil {
		return nil, nil, err
	}
	return key, check, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func chunkNonce(i uint64) []byte {
	nonce := make([]byte, 12)
	binary.BigEndian.PutUint64(nonce[nonceIndexOff:], i)
	return nonce
}

func chunkAD(headerSum [sha256.Size]byte, i uint64) []byte {
	return binary.LittleEndian.AppendUint64(headerSum[:], i)
}

func chunkCRC(i uint64, sealed []byte) uint32 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], i)
	return crc32.Update(crc32.Update(0, castagnoli, b[:]), castagnoli, sealed)
}

func numChunks(size int64, cs int) int64 { return (size + int64(cs) - 1) / int64(cs) }

// Write writes a backup of state (a kv snapshot) to w, sealed with the
// token secret. It fills in h's Salt, KeyCheck, Size and ChunkSize.
func Write(w io.Writer, h Header, state []byte, secret string) error {
	h.Salt = make([]byte, saltLen)
	if _, err := rand.Read(h.Salt); err != nil {
		return fmt.Errorf("backup: write: %w", err)
	}
	key, check, err := deriveKeys(secret, h.Salt)
	if err != nil {
		return fmt.Errorf("backup: write: %w", err)
	}
	h.KeyCheck, h.Size, h.ChunkSize = check, int64(len(state)), chunkSize
	hj, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("backup: write: %w", err)
	}
	aead, err := newAEAD(key)
	if err != nil {
		return fmt.Errorf("backup: write: %w", err)
	}
	head := make([]byte, 0, prefixLen+len(hj)+crcLen)
	head = append(head, magic...)
	head = binary.LittleEndian.AppendUint32(head, version)
	head = binary.LittleEndian.AppendUint32(head, uint32(len(hj)))
	head = append(head, hj...)
	head = binary.LittleEndian.AppendUint32(head, crc32.Checksum(head, castagnoli))
	if _, err := w.Write(head); err != nil {
		return fmt.Errorf("backup: write: %w", err)
	}
	sum := sha256.Sum256(hj)
	buf := make([]byte, 0, chunkSize+tagLen+crcLen)
	for i := int64(0); i < numChunks(h.Size, chunkSize); i++ {
		plain := state[i*chunkSize : min((i+1)*chunkSize, h.Size)]
		buf = aead.Seal(buf[:0], chunkNonce(uint64(i)), plain, chunkAD(sum, uint64(i)))
		buf = binary.LittleEndian.AppendUint32(buf, chunkCRC(uint64(i), buf))
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("backup: write: %w", err)
		}
	}
	return nil
}

// File is a parsed backup whose checksums hold.
type File struct {
	Name   string
	Header Header
	raw    []byte // the header's JSON
	body   []byte // the chunks, each with its checksum
	start  int64  // offset of body in the file
}

// ReadFile reads and parses the backup at path.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return Parse(path, data)
}

// Parse checks the structure and the checksums of a backup's bytes; name
// is the file's name for errors.
func Parse(name string, data []byte) (*File, error) {
	bad := func(off int64, format string, args ...any) error {
		return &CorruptError{File: name, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	size := int64(len(data))
	if size < prefixLen {
		if !bytes.HasPrefix([]byte(magic), data[:min(len(data), len(magic))]) {
			return nil, bad(0, "not an isle backup (no %q at its start)", magic)
		}
		return nil, bad(size, "file of %d bytes is truncated within the %d-byte prefix", size, prefixLen)
	}
	if string(data[:len(magic)]) != magic {
		return nil, bad(0, "not an isle backup (no %q at its start)", magic)
	}
	if v := binary.LittleEndian.Uint32(data[8:]); v != version {
		return nil, bad(8, "format version %d; this isle reads version %d (use the isle that wrote it)", v, version)
	}
	hl := int64(binary.LittleEndian.Uint32(data[12:]))
	if hl == 0 || hl > maxHeaderLen {
		return nil, bad(12, "header length %d is out of range (1 to %d)", hl, maxHeaderLen)
	}
	end := prefixLen + hl + crcLen
	if size < end {
		return nil, bad(size, "file of %d bytes is truncated within its header (%d bytes)", size, end)
	}
	if got, want := crc32.Checksum(data[:prefixLen+hl], castagnoli), binary.LittleEndian.Uint32(data[prefixLen+hl:]); got != want {
		return nil, bad(0, "header checksum mismatch in bytes 0..%d (stored %08x, computed %08x)", prefixLen+hl, want, got)
	}
	f := &File{Name: name, raw: data[prefixLen : prefixLen+hl], start: end}
	dec := json.NewDecoder(bytes.NewReader(f.raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f.Header); err != nil {
		return nil, bad(prefixLen, "undecodable header: %v", err)
	}
	h := &f.Header
	switch {
	case h.ChunkSize < minChunkSize || h.ChunkSize > maxChunkSize:
		return nil, bad(prefixLen, "header: chunk size %d is out of range", h.ChunkSize)
	case h.Size < 0:
		return nil, bad(prefixLen, "header: negative state size %d", h.Size)
	case len(h.Salt) != saltLen || len(h.KeyCheck) != keyCheckLen:
		return nil, bad(prefixLen, "header: salt or key check of the wrong length")
	case h.CAHash == "" || len(h.CACert) == 0 || len(h.CAKeySealed) == 0:
		return nil, bad(prefixLen, "header: the CA is missing")
	}
	chunks := numChunks(h.Size, h.ChunkSize)
	want := end + h.Size + chunks*(tagLen+crcLen)
	switch {
	case size < want:
		return nil, bad(size, "file is truncated: %d bytes, the header announces %d", size, want)
	case size > want:
		return nil, bad(want, "%d unexpected bytes after the end of the backup", size-want)
	}
	f.body = data[end:]
	off := int64(0)
	for i := int64(0); i < chunks; i++ {
		n := min(int64(h.ChunkSize), h.Size-i*int64(h.ChunkSize)) + tagLen
		sealed := f.body[off : off+n]
		stored := binary.LittleEndian.Uint32(f.body[off+n:])
		if got := chunkCRC(uint64(i), sealed); got != stored {
			return nil, bad(end+off, "checksum mismatch in chunk %d (bytes %d..%d; stored %08x, computed %08x)",
				i, end+off, end+off+n, stored, got)
		}
		off += n + crcLen
	}
	return f, nil
}

// Open checks that tok is the token of the file's cluster and returns the
// decrypted state.
func (f *File) Open(tok wire.Token) ([]byte, error) {
	h := &f.Header
	if tok.CAHash != h.CAHash {
		return nil, fmt.Errorf("%w: %s is a backup of cluster %s (CA %s); the token is of the cluster with CA %s",
			ErrOtherCluster, f.Name, h.ClusterID, h.CAHash, tok.CAHash)
	}
	key, check, err := deriveKeys(tok.Secret, h.Salt)
	if err != nil {
		return nil, fmt.Errorf("backup: open %s: %w", f.Name, err)
	}
	if subtle.ConstantTimeCompare(check, h.KeyCheck) != 1 {
		return nil, fmt.Errorf("%w: %s: the token has the CA of cluster %s but not its secret (if the server token was replaced since the backup, give the token of its time)", ErrWrongToken, f.Name, h.ClusterID)
	}
	aead, err := newAEAD(key)
	if err != nil {
		return nil, fmt.Errorf("backup: open %s: %w", f.Name, err)
	}
	sum := sha256.Sum256(f.raw)
	state := make([]byte, 0, h.Size)
	off := int64(0)
	for i := int64(0); i < numChunks(h.Size, h.ChunkSize); i++ {
		n := min(int64(h.ChunkSize), h.Size-i*int64(h.ChunkSize)) + tagLen
		if state, err = aead.Open(state, chunkNonce(uint64(i)), f.body[off:off+n], chunkAD(sum, uint64(i))); err != nil {
			return nil, &CorruptError{File: f.Name, Offset: f.start + off,
				Reason: fmt.Sprintf("chunk %d fails authentication although its checksum holds (the file was altered)", i)}
		}
		off += n + crcLen
	}
	return state, nil
}
