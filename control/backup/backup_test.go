package backup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/wire"
)

var testToken = wire.Token{CAHash: "sha256:" + strings.Repeat("ab", 32), Secret: strings.Repeat("a", 32)}

func testHeader() Header {
	return Header{ClusterID: "c0ffee", Member: "pi1", Revision: 42, Index: 77, Created: time.Unix(1700000000, 0).UTC(),
		Servers: []string{"pi1", "pi2"}, CAHash: testToken.CAHash, CACert: []byte("cert"), CAKeySealed: []byte("sealed")}
}

// testState is a state of 2.5 chunks, with a secret in its second chunk.
func testState() []byte {
	b := make([]byte, chunkSize*5/2)
	for i := range b {
		b[i] = byte(i * 31)
	}
	copy(b[chunkSize+100:], "top-secret-password")
	return b
}

func write(t *testing.T, state []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, testHeader(), state, testToken.Secret); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	for _, state := range [][]byte{testState(), {}, []byte("small")} {
		data := write(t, state)
		if bytes.Contains(data, []byte("top-secret-password")) {
			t.Fatal("the state is in the file in clear")
		}
		f, err := Parse("f", data)
		if err != nil {
			t.Fatal(err)
		}
		want := testHeader()
		if h := f.Header; h.ClusterID != want.ClusterID || h.Revision != 42 || h.Index != 77 || !h.Created.Equal(want.Created) ||
			len(h.Servers) != 2 || h.Size != int64(len(state)) || string(h.CAKeySealed) != "sealed" {
			t.Fatalf("header %+v", h)
		}
		got, err := f.Open(testToken)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, state) {
			t.Fatalf("state of %d bytes came back as %d different bytes", len(state), len(got))
		}
	}
}

func TestEveryFileIsSealedAnew(t *testing.T) {
	a, b := write(t, []byte("same")), write(t, []byte("same"))
	if bytes.Equal(a, b) {
		t.Fatal("two backups of one state are the same bytes: the salt is not random")
	}
}

func TestRefusals(t *testing.T) {
	f, err := Parse("f", write(t, testState()))
	if err != nil {
		t.Fatal(err)
	}
	other := wire.Token{CAHash: "sha256:" + strings.Repeat("cd", 32), Secret: testToken.Secret}
	if _, err := f.Open(other); !errors.Is(err, ErrOtherCluster) || !strings.Contains(err.Error(), "c0ffee") {
		t.Fatalf("a token of another cluster: %v", err)
	}
	wrong := wire.Token{CAHash: testToken.CAHash, Secret: strings.Repeat("b", 32)}
	if _, err := f.Open(wrong); !errors.Is(err, ErrWrongToken) {
		t.Fatalf("a wrong secret: %v", err)
	}
}

func TestCorruptionNamesTheOffset(t *testing.T) {
	good := write(t, testState())
	hl := int64(binary.LittleEndian.Uint32(good[12:]))
	body := prefixLen + hl + crcLen
	chunk1 := body + chunkSize + tagLen + crcLen // start of the second chunk
	cases := []struct {
		name    string
		mangle  func([]byte) []byte
		offset  int64
		message string
	}{
		{"not a backup", func(b []byte) []byte { return []byte("hello, world, this is not it") }, 0, "not an isle backup"},
		{"newer version", func(b []byte) []byte { b[8] = 2; return b }, 8, "format version 2"},
		{"header bit flip", func(b []byte) []byte { b[prefixLen+5] ^= 1; return b }, 0, "header checksum"},
		{"truncated header", func(b []byte) []byte { return b[:prefixLen+3] }, prefixLen + 3, "truncated within its header"},
		{"bit flip in the second chunk", func(b []byte) []byte { b[chunk1+1000] ^= 0x10; return b }, chunk1, "chunk 1"},
		{"truncated", func(b []byte) []byte { return b[:len(b)-10] }, int64(len(good) - 10), "truncated"},
		{"trailing bytes", func(b []byte) []byte { return append(b, 0, 0) }, int64(len(good)), "unexpected bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("/backups/x.snapshot", c.mangle(bytes.Clone(good)))
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want a *CorruptError", err)
			}
			if ce.Offset != c.offset || !strings.Contains(err.Error(), c.message) || !strings.Contains(err.Error(), "/backups/x.snapshot") {
				t.Fatalf("got %q at offset %d, want offset %d and %q", err, ce.Offset, c.offset, c.message)
			}
		})
	}
}

// A chunk whose checksum was recomputed after a change (tampering, not
// damage) fails authentication; so do chunks swapped with their checksums.
func TestTamperingIsCaught(t *testing.T) {
	good := write(t, testState())
	hl := int64(binary.LittleEndian.Uint32(good[12:]))
	body := prefixLen + hl + crcLen
	n := int64(chunkSize + tagLen)

	b := bytes.Clone(good)
	b[body+10] ^= 1
	binary.LittleEndian.PutUint32(b[body+n:], chunkCRC(0, b[body:body+n]))
	f, err := Parse("f", b)
	if err != nil {
		t.Fatalf("the checksum was fixed, Parse should pass: %v", err)
	}
	var ce *CorruptError
	if _, err := f.Open(testToken); !errors.As(err, &ce) || ce.Offset != body {
		t.Fatalf("a changed chunk: %v, want a *CorruptError at %d", err, body)
	}

	// The header's revision changed, its checksum recomputed.
	b = bytes.Clone(good)
	i := bytes.Index(b, []byte(`"revision":42`))
	b[i+len(`"revision":`)] = '5'
	binary.LittleEndian.PutUint32(b[prefixLen+hl:], crcOf(b[:prefixLen+hl]))
	if f, err = Parse("f", b); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Open(testToken); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a changed header: %v, want a refusal", err)
	}
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
