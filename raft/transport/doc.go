// Package transport carries Raft messages between the members of an isle
// cluster over TCP (optionally TLS).
//
// # Contract
//
// A Transport is created with New, accepts connections after Start and sends
// to the peers registered with AddPeer. Send never blocks the caller (the
// Raft Ready loop): every peer has a bounded outbound queue; a message that
// does not fit, or that is for a peer with no established connection, is
// dropped and the Handler is told with ReportUnreachable (asynchronously, from
// a transport goroutine, coalesced per peer). Raft retransmits what matters.
//
// Every peer has one long-lived outbound stream for ordinary messages. A
// writer goroutine drains the peer's queue and writes everything queued as one
// batch of frames through a bufio.Writer followed by a single Flush. Messages
// sent to one peer arrive in the order they were passed to Send, as long as
// none is dropped and the stream is not re-established in between.
//
// MsgSnap travels over its own short-lived connection so that a large snapshot
// never delays heartbeats. When the receiver has handed the snapshot to its
// Handler, the sender reports ReportSnapshot(to, SnapshotFinish); any failure
// reports SnapshotFailure (and ReportUnreachable).
//
// Lost or refused connections are retried with exponential backoff between
// Config.MinBackoff and Config.MaxBackoff. Close stops every goroutine the
// Transport started and closes the listener and all connections.
//
// Inbound connections from members never passed to AddPeer are accepted (a
// joining member may hear from others before it knows them all); members
// passed to RemovePeer are refused until added again.
//
// Everything read from the network is validated: a bad handshake, an
// oversized or malformed frame, or a message that is not addressed to this
// member closes that connection and logs the reason. Nothing a peer sends can
// make the Transport panic.
//
// # Wire format (version 1)
//
// All integers are big-endian.
//
//	handshake (dialer → acceptor, 32 bytes):
//	    magic "ISRT" | version u8 (1) | kind u8 (1 stream, 2 snapshot) | reserved u16 (0)
//	    | cluster ID u64 | from ID u64 | to ID u64
//	reply (acceptor → dialer, 2 bytes): version u8 | status u8
//	    status 0 accepted, 1 unsupported version, 2 wrong cluster,
//	    3 wrong member (to ≠ acceptor), 4 sender refused (0, self, removed),
//	    5 malformed handshake; on a non-zero status the acceptor closes.
//	frame: length u32 (1 … MaxFrameSize) | raftpb.Message (protobuf)
//
// A stream connection then carries frames from dialer to acceptor only, for
// as long as it lives. A snapshot connection carries exactly one frame holding
// a MsgSnap, after which the acceptor answers with one more reply (status 0
// processed, 6 handler failed) and closes.
//
// # Security
//
// With Config.TLS set, every accepted connection is a TLS server
// connection and peers are dialed with the same configuration; set
// ClientAuth to tls.RequireAndVerifyClientCert (or verify in
// VerifyConnection) for mutual authentication. With Config.PeerID the
// certificate is bound to a member: an acceptor refuses a handshake whose
// from ID is not the one the dialer's certificate names, a dialer a peer
// whose certificate is not the member dialed, before any Raft message.
// Every message must then come from the connection's member (m.From).
//
// Config.AllowPlain opens a door for a rolling upgrade from a release
// without TLS: while it reports true, an accepted connection whose first
// byte is not a TLS handshake record (0x16) is served in plain TCP, and a
// peer that answers a ClientHello with anything but TLS is dialed again in
// plain TCP. Once it reports false, neither happens.
package transport
