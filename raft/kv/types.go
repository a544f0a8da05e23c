package kv

import (
	"errors"
	"log/slog"
	"strconv"
)

var (
	// ErrCompacted means a watch asked for revisions that the event history
	// no longer holds (or the store was restored from a snapshot). The
	// caller should list again and watch from the listed revision.
	ErrCompacted = errors.New("kv: required revision has been compacted")

	// ErrMalformed is wrapped by every error about bytes that do not decode
	// as a Request or a snapshot.
	ErrMalformed = errors.New("kv: malformed data")
)

// OpType is the kind of an Op.
type OpType uint8

// Op types. The zero OpType is invalid so a forgotten Type is caught.
const (
	OpPut    OpType = 1
	OpDelete OpType = 2
)

// String returns "put", "delete" or "OpType(n)".
func (t OpType) String() string {
	switch t {
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	}
	return "OpType(" + strconv.Itoa(int(t)) + ")"
}

// Op is one operation of a transaction.
type Op struct {
	Type  OpType
	Key   string // must not be empty
	Value []byte // put only; ignored (not encoded) for delete
	// IfModRev is a precondition on the key's ModRevision as seen by this
	// op: -1 none; 0 the key must not exist; >0 it must exist with exactly
	// this ModRevision.
	IfModRev int64
}

// Request is one atomic transaction, the payload of one Raft entry.
type Request struct {
	// ID identifies the request for deduplication of retried proposals:
	// random and non-zero. 0 means "never deduplicate".
	ID  uint64
	Ops []Op
}

// KeyValue is a key with its value and counters.
type KeyValue struct {
	Key            string
	Value          []byte // shared, read-only; nil for an empty value
	CreateRevision int64  // revision of the put that created the key
	ModRevision    int64  // revision of the last change
	Version        int64  // puts since creation, starting at 1
}

// Result is the outcome of applying one Request.
type Result struct {
	// Revision is the store revision after this transaction: the new
	// revision if it succeeded, the unchanged current one if it failed.
	Revision  int64
	Succeeded bool
	// FailedOp is the index of the first op whose precondition failed, -1
	// if none (also -1 for undecodable data).
	FailedOp int
	// Prev holds, per op, the key's value just before that op (nil if the
	// key did not exist). Nil when the transaction failed.
	Prev []*KeyValue
	// Current is, when a precondition failed, the committed value of the
	// failed op's key (nil if absent).
	Current *KeyValue
	// Duplicate reports that the request ID had been applied before: this
	// is the remembered result of the first application, and the Value of
	// Prev and Current entries is nil (metadata only).
	Duplicate bool
}

// EventType is the kind of an Event.
type EventType uint8

// Event types.
const (
	EventPut    EventType = 1
	EventDelete EventType = 2
)

// String returns "PUT", "DELETE" or "EventType(n)".
func (t EventType) String() string {
	switch t {
	case EventPut:
		return "PUT"
	case EventDelete:
		return "DELETE"
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// Event is one change, as delivered to watchers.
type Event struct {
	Type EventType
	// KV is the new state for a put. For a delete only KV.Key and
	// KV.ModRevision (the deletion revision) are set.
	KV KeyValue
	// Prev is the state before the change, nil if the key did not exist.
	Prev *KeyValue
}

// Options configure a Store. Zero values select the defaults.
type Options struct {
	// HistoryLimit is the number of events kept for watches; default 20000.
	HistoryLimit int
	// HistoryBytes additionally bounds the history by the key and value
	// bytes of its events (what dominates its memory: 20000 events of 3 KiB
	// objects would hold ~60 MiB); default 2 MiB, negative: no byte bound.
	// A watch resumed from further back is answered 410 Gone and lists
	// again, as a watch cache that no longer reaches its revision.
	HistoryBytes int64
	// DedupLimit is the number of request IDs remembered; default 10000.
	DedupLimit int
	// WatchBuffer is the number of revisions queued per watcher before it
	// falls back to reading the history; default 64.
	WatchBuffer int
	// Logger receives warnings (undecodable entries); nil → slog.Default().
	Logger *slog.Logger
}

// Defaults for Options.
const (
	DefaultHistoryLimit = 20000
	DefaultHistoryBytes = 2 << 20
	DefaultDedupLimit   = 10000
	DefaultWatchBuffer  = 64
)

func (o Options) withDefaults() Options {
	if o.HistoryLimit <= 0 {
		o.HistoryLimit = DefaultHistoryLimit
	}
	switch {
	case o.HistoryBytes == 0:
		o.HistoryBytes = DefaultHistoryBytes
	case o.HistoryBytes < 0:
		o.HistoryBytes = 0 // internally 0 means unbounded
	}
	if o.DedupLimit <= 0 {
		o.DedupLimit = DefaultDedupLimit
	}
	if o.WatchBuffer <= 0 {
		o.WatchBuffer = DefaultWatchBuffer
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
