package transport

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// writeHandshake sends h on c and returns the acceptor's reply status.
func writeHandshake(t *testing.T, c net.Conn, raw []byte) byte {
	t.Helper()
	if _, err := c.Write(raw); err != nil {
		t.Fatalf("write handshake: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(waitTimeout))
	var reply [replySize]byte
	if _, err := io.ReadFull(c, reply[:]); err != nil {
		t.Fatalf("read reply: %v", err)
	}
	c.SetReadDeadline(time.Time{})
	if reply[0] != protocolVersion {
		t.Fatalf("reply version %d, want %d", reply[0], protocolVersion)
	}
	return reply[1]
}

func hs(version, kind byte, cluster, from, to uint64) []byte {
	b := handshake{version: version, kind: kind, clusterID: cluster, from: from, to: to}.marshal()
	return b[:]
}

func TestHandshakeValidation(t *testing.T) {
	b := newNode(t, 2, nil)
	b.RemovePeer(7)
	badMagic := []byte("GET / HTTP/1.1\r\nHost: isle\r\n\r\n..")
	tests := []struct {
		name       string
		raw        []byte
		wantStatus byte
		wantLog    string // in b's log
	}{
		{"stream accepted", hs(1, kindStream, testCluster, 1, 2), statusOK, ""},
		{"snapshot accepted", hs(1, kindSnapshot, testCluster, 1, 2), statusOK, ""},
		{"wrong cluster", hs(1, kindStream, testCluster+1, 1, 2), statusWrongCluster, "cluster ID mismatch"},
		{"wrong member", hs(1, kindStream, testCluster, 1, 3), statusWrongMember, "member ID mismatch"},
		{"sender zero", hs(1, kindStream, testCluster, 0, 2), statusSenderRefused, "peer claims ID 0"},
		{"sender is the receiver", hs(1, kindStream, testCluster, 2, 2), statusSenderRefused, "peer claims ID 2"},
		{"removed sender", hs(1, kindStream, testCluster, 7, 2), statusSenderRefused, "peer claims ID 7"},
		{"newer version", hs(2, kindStream, testCluster, 1, 2), statusBadVersion, "peer speaks version 2"},
		{"unknown kind", hs(1, 9, testCluster, 1, 2), statusMalformed, "unknown connection kind 9"},
		{"not an isle peer", badMagic[:handshakeSize], statusMalformed, "bad handshake magic"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := rawDial(t, b.addr)
			status := writeHandshake(t, c, tc.raw)
			if status != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d (%s)", status, statusText(status), tc.wantStatus, statusText(tc.wantStatus))
			}
			if status != statusOK {
				expectClosed(t, c)
				waitFor(t, "log %q", func() bool { return b.logs.contains(tc.wantLog) }, tc.wantLog)
			}
		})
	}
	if n := b.h.count(); n != 0 {
		t.Fatalf("handler got %d messages", n)
	}
}

func TestHandshakeTimeout(t *testing.T) {
	b := newNode(t, 2, func(c *Config) { c.DialTimeout = 50 * time.Millisecond })
	c := rawDial(t, b.addr)
	if _, err := c.Write([]byte("ISRT")); err != nil { // then nothing
		t.Fatal(err)
	}
	expectClosed(t, c)
	waitFor(t, "refusal logged", func() bool { return b.logs.contains("read handshake") })
}

func TestWrongClusterRejected(t *testing.T) {
	a := newNode(t, 1, nil)
	b := newNode(t, 2, func(c *Config) { c.ClusterID = testCluster + 1 })
	a.AddPeer(2, b.addr)
	waitFor(t, "a to log the rejection", func() bool { return a.logs.contains("cluster ID mismatch") })
	waitFor(t, "b to log the rejection", func() bool { return b.logs.contains("cluster ID mismatch") })
	if a.peer(2).connected.Load() {
		t.Fatal("stream established across clusters")
	}
	a.Send([]raftpb.Message{appMsg(1, 2, 1, 0)})
	waitFor(t, "ReportUnreachable(2)", func() bool { return a.h.unreachableCount(2) > 0 })
	if n := b.h.count(); n != 0 {
		t.Fatalf("b's handler got %d messages from another cluster", n)
	}
}

func TestInvalidFramesCloseConnection(t *testing.T) {
	const limit = 4096
	frame := func(m raftpb.Message) []byte {
		b, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
	}
	header := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	tests := []struct {
		name    string
		kind    byte
		in      []byte
		wantLog string
	}{
		{"oversize frame", kindStream, header(limit + 1), "peer announced 4097 bytes, limit is 4096"},
		{"4 GiB frame", kindStream, header(^uint32(0)), "peer announced 4294967295 bytes"},
		{"empty frame", kindStream, header(0), "empty frame"},
		{"undecodable body", kindStream, append(header(5), 0xff, 0xff, 0xff, 0xff, 0xff), "undecodable message"},
		{"addressed to another member", kindStream, frame(appMsg(1, 3, 1, 0)), "addressed to 3"},
		{"local message type", kindStream, frame(raftpb.Message{Type: raftpb.MsgHup, From: 1, To: 2}), "local-only message type MsgHup"},
		{"unknown message type", kindStream, frame(raftpb.Message{Type: 99, From: 1, To: 2}), "unknown message type 99"},
		{"MsgSnap without snapshot", kindStream, frame(raftpb.Message{Type: raftpb.MsgSnap, From: 1, To: 2}), "MsgSnap without a snapshot"},
		{"truncated frame", kindStream, append(header(100), 1, 2, 3), "unexpected EOF"},
		{"non-snapshot on snapshot connection", kindSnapshot, frame(appMsg(1, 2, 1, 0)), "MsgApp on a snapshot connection"},
		{"oversize snapshot", kindSnapshot, header(limit + 1), "peer announced 4097 bytes"},
	}
	b := newNode(t, 2, func(c *Config) { c.MaxFrameSize = limit })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := rawDial(t, b.addr)
			if s := writeHandshake(t, c, hs(1, tc.kind, testCluster, 1, 2)); s != statusOK {
				t.Fatalf("handshake status %s", statusText(s))
			}
			if _, err := c.Write(tc.in); err != nil {
				t.Fatal(err)
			}
			if tc.name == "truncated frame" {
				c.(*net.TCPConn).CloseWrite()
			}
			expectClosed(t, c)
			waitFor(t, "log %q", func() bool { return b.logs.contains(tc.wantLog) }, tc.wantLog)
		})
	}
	if n := b.h.count(); n != 0 {
		t.Fatalf("handler got %d invalid messages", n)
	}
	// The transport survives all of that.
	a := newNode(t, 1, nil)
	a.AddPeer(2, b.addr)
	waitFor(t, "delivery after invalid input", func() bool {
		a.Send([]raftpb.Message{appMsg(1, 2, 1, 0)})
		return b.h.count() > 0
	})
}
