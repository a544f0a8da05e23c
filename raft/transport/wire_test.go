package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

func TestFrameRoundTrip(t *testing.T) {
	snap := &raftpb.Snapshot{Data: bytes.Repeat([]byte("s"), 3000), Metadata: raftpb.SnapshotMetadata{Index: 9, Term: 2}}
	tests := []struct {
		name    string
		m       raftpb.Message
		limit   int
		wantErr error
	}{
		{name: "heartbeat", m: raftpb.Message{Type: raftpb.MsgHeartbeat, From: 1, To: 2, Term: 3, Commit: 4}, limit: minFrameLimit},
		{name: "append with entries", m: appMsg(1, 2, 5, 700), limit: minFrameLimit},
		{name: "snapshot", m: raftpb.Message{Type: raftpb.MsgSnap, From: 1, To: 2, Snapshot: snap}, limit: 1 << 20},
		{name: "larger than the limit", m: raftpb.Message{Type: raftpb.MsgSnap, From: 1, To: 2, Snapshot: snap}, limit: minFrameLimit, wantErr: ErrFrameTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := []byte("prefix")
			buf, err := appendFrame(prefix, &tc.m, tc.limit)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("appendFrame: err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}
			if !bytes.HasPrefix(buf, prefix) {
				t.Fatal("appendFrame clobbered the buffer's existing bytes")
			}
			body, err := readFrame(bytes.NewReader(buf[len(prefix):]), tc.limit, nil)
			if err != nil {
				t.Fatalf("readFrame: %v", err)
			}
			var got raftpb.Message
			if err := got.Unmarshal(body); err != nil {
				t.Fatal(err)
			}
			want, _ := tc.m.Marshal()
			again, _ := got.Marshal()
			if !bytes.Equal(want, again) {
				t.Fatalf("round trip changed the message: %v vs %v", tc.m.String(), got.String())
			}
		})
	}
}

func TestReadFrameRejects(t *testing.T) {
	header := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	tests := []struct {
		name    string
		in      []byte
		wantErr error
	}{
		{name: "empty input", in: nil, wantErr: io.EOF},
		{name: "partial header", in: []byte{0, 0}, wantErr: io.ErrUnexpectedEOF},
		{name: "zero length", in: header(0), wantErr: ErrProtocol},
		{name: "one byte over the limit", in: header(minFrameLimit + 1), wantErr: ErrFrameTooLarge},
		{name: "4 GiB announced", in: header(^uint32(0)), wantErr: ErrFrameTooLarge},
		{name: "truncated body", in: append(header(100), make([]byte, 10)...), wantErr: io.ErrUnexpectedEOF},
		{name: "header only", in: header(10), wantErr: io.ErrUnexpectedEOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readFrame(bytes.NewReader(tc.in), minFrameLimit, make([]byte, 0, 64))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// A peer announcing a huge frame must not make us allocate it up front.
func TestReadFrameAllocatesAsDataArrives(t *testing.T) {
	in := append(binary.BigEndian.AppendUint32(nil, 256<<20), make([]byte, 100)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readFrame(bytes.NewReader(in), DefaultMaxFrameSize, nil)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want unexpected EOF", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Fatalf("allocated %d bytes for a frame that sent 100", grew)
	}
}

func TestHandshakeEncoding(t *testing.T) {
	h := handshake{version: protocolVersion, kind: kindSnapshot, clusterID: 0x0102030405060708, from: 0xaa, to: 0xbb}
	b := h.marshal()
	got, err := parseHandshake(b[:])
	if err != nil || got != h {
		t.Fatalf("round trip: got %+v, %v; want %+v", got, err, h)
	}
	tests := []struct {
		name string
		edit func(b []byte) []byte
	}{
		{"bad magic", func(b []byte) []byte { b[0] = 'X'; return b }},
		{"reserved byte set", func(b []byte) []byte { b[7] = 1; return b }},
		{"short", func(b []byte) []byte { return b[:31] }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := h.marshal()
			if _, err := parseHandshake(tc.edit(c[:])); !errors.Is(err, ErrProtocol) {
				t.Fatalf("err = %v, want ErrProtocol", err)
			}
		})
	}
}

// FuzzDecodeFrame feeds arbitrary bytes through the inbound decoding path;
// it must return errors, never panic.
func FuzzDecodeFrame(f *testing.F) {
	good, _ := appendFrame(nil, &raftpb.Message{Type: raftpb.MsgHeartbeat, From: 1, To: 2}, minFrameLimit)
	snap, _ := appendFrame(nil, &raftpb.Message{Type: raftpb.MsgSnap, From: 1, To: 2, Snapshot: &raftpb.Snapshot{Data: []byte("x")}}, minFrameLimit)
	f.Add(good)
	f.Add(snap)
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Add([]byte{0, 0, 0, 3, 0x08, 0x96, 0x01})
	tr := &Transport{cfg: Config{ID: 2}}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			body, err := readFrame(r, minFrameLimit, nil)
			if err != nil {
				return
			}
			if len(body) == 0 || len(body) > minFrameLimit {
				t.Fatalf("readFrame returned %d bytes", len(body))
			}
			var m raftpb.Message
			if m.Unmarshal(body) != nil {
				return
			}
			for _, kind := range []byte{kindStream, kindSnapshot} {
				if err := tr.checkInbound(&m, kind, m.From); err == nil && m.Type == raftpb.MsgSnap && m.Snapshot == nil {
					t.Fatal("accepted MsgSnap without snapshot")
				}
			}
		}
	})
}

func FuzzParseHandshake(f *testing.F) {
	b := handshake{version: 1, kind: kindStream, clusterID: 1, from: 2, to: 3}.marshal()
	f.Add(b[:])
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n....."))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := parseHandshake(data)
		if err != nil {
			return
		}
		again := h.marshal()
		if !bytes.Equal(again[:], data) {
			t.Fatalf("accepted handshake does not re-encode to its input")
		}
	})
}
