package kv

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
)

func TestRequestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		req  Request
	}{
		{name: "empty", req: Request{}},
		{name: "max ID", req: Request{ID: math.MaxUint64}},
		{name: "single put", req: Request{ID: 1, Ops: []Op{put("/registry/pods/default/x", "value", -1)}}},
		{name: "empty value is nil", req: Request{ID: 2, Ops: []Op{{Type: OpPut, Key: "k", IfModRev: 0}}}},
		{name: "large IfModRev", req: Request{ID: 3, Ops: []Op{put("k", "v", math.MaxInt64-1)}}},
		{name: "mixed", req: Request{ID: 4, Ops: []Op{put("a", "1", 5), del("b", 7), del("c", -1), put("a", string(make([]byte, 300)), 0)}}},
		{name: "binary key", req: Request{ID: 5, Ops: []Op{put("\x00\xff", "\x00", -1)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.req.Marshal()
			if b[0] != requestVersion {
				t.Fatalf("first byte %d, want version %d", b[0], requestVersion)
			}
			got, err := UnmarshalRequest(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.req) {
				t.Errorf("round trip:\n got %+v\nwant %+v", *got, tt.req)
			}
			if len(b) > 0 {
				b[len(b)-1] ^= 0xff // the result must not alias the input
				if !reflect.DeepEqual(*got, tt.req) {
					t.Errorf("decoded request aliases its input")
				}
			}
		})
	}
}

func TestMarshalDropsDeleteValue(t *testing.T) {
	r := Request{ID: 1, Ops: []Op{{Type: OpDelete, Key: "k", Value: []byte("ignored"), IfModRev: -1}}}
	got, err := UnmarshalRequest(r.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if got.Ops[0].Value != nil {
		t.Errorf("delete value %q survived the round trip", got.Ops[0].Value)
	}
}

func TestUnmarshalRequestErrors(t *testing.T) {
	valid := (&Request{ID: 9, Ops: []Op{put("key", "value", 3), del("other", -1)}}).Marshal()
	tests := []struct {
		name string
		data []byte
	}{
		{name: "empty", data: nil},
		{name: "version only", data: []byte{requestVersion}},
		{name: "unknown version", data: append([]byte{2}, valid[1:]...)},
		{name: "trailing byte", data: append(append([]byte(nil), valid...), 0)},
		{name: "op count beyond input", data: append(append([]byte{requestVersion}, make([]byte, 8)...), 0x7f)},
		{name: "huge op count", data: append(append([]byte{requestVersion}, make([]byte, 8)...), 0xff, 0xff, 0xff, 0xff, 0x0f)},
		{name: "varint overflow", data: append(append([]byte{requestVersion}, make([]byte, 8)...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)},
		{name: "non-canonical varint", data: append(append([]byte{requestVersion}, make([]byte, 8)...), 0x80, 0x00)},
		{name: "unknown op type", data: (&Request{Ops: []Op{{Type: 3, Key: "k"}}}).Marshal()},
		{name: "zero op type", data: (&Request{Ops: []Op{{Key: "k"}}}).Marshal()},
		{name: "empty key", data: (&Request{Ops: []Op{put("", "v", -1)}}).Marshal()},
		{name: "IfModRev -2", data: (&Request{Ops: []Op{put("k", "v", -2)}}).Marshal()},
		{name: "IfModRev MaxInt64", data: (&Request{Ops: []Op{put("k", "v", math.MaxInt64)}}).Marshal()},
		{name: "key length beyond input", data: []byte{requestVersion, 0, 0, 0, 0, 0, 0, 0, 0, 1, byte(OpPut), 0x7f, 'k', 0, 0}},
		{name: "value length beyond input", data: []byte{requestVersion, 0, 0, 0, 0, 0, 0, 0, 0, 1, byte(OpPut), 1, 'k', 0, 0x7f}},
	}
	for i := 1; i < len(valid); i++ {
		tests = append(tests, struct {
			name string
			data []byte
		}{name: fmt.Sprintf("truncated at %d", i), data: valid[:i]})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := UnmarshalRequest(tt.data)
			if err == nil {
				t.Fatalf("decoded %+v", r)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
		})
	}
}

func FuzzUnmarshalRequest(f *testing.F) {
	seeds := []Request{
		{},
		{ID: 1, Ops: []Op{put("a", "b", -1)}},
		{ID: math.MaxUint64, Ops: []Op{put("/registry/pods/ns/name", "{\"kind\":\"Pod\"}", 0), del("/x", 12345)}},
		{ID: 7, Ops: []Op{del("k", 1), put("k", "", 2), put("k", string(make([]byte, 200)), math.MaxInt64-1)}},
	}
	for _, r := range seeds {
		f.Add(r.Marshal())
	}
	f.Add([]byte{})
	f.Add([]byte{requestVersion})
	f.Add([]byte{requestVersion, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := UnmarshalRequest(data)
		if err != nil {
			if r != nil || !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v with request %v", err, r)
			}
			return
		}
		// The encoding is canonical: what decodes re-encodes to the same bytes.
		if again := r.Marshal(); !bytes.Equal(again, data) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", data, again)
		}
		// Applying it must not panic either, and must succeed or fail cleanly.
		s := New(quietOptions())
		if res := s.Apply(data); !res.Succeeded && res.FailedOp < 0 {
			t.Fatalf("decodable request treated as undecodable: %+v", res)
		}
	})
}

func TestPeekID(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		want    uint64
		wantErr bool
	}{
		{name: "request", data: txn(0xdeadbeefcafe, put("k", "v", -1)), want: 0xdeadbeefcafe},
		{name: "zero ID", data: txn(0), want: 0},
		{name: "too short", data: txn(5)[:8], wantErr: true},
		{name: "other version", data: append([]byte{2}, txn(5)[1:]...), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PeekID(tt.data)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("PeekID = %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
		})
	}
}

func TestTypeStrings(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{OpPut.String(), "put"},
		{OpDelete.String(), "delete"},
		{OpType(7).String(), "OpType(7)"},
		{EventPut.String(), "PUT"},
		{EventDelete.String(), "DELETE"},
		{EventType(0).String(), "EventType(0)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
