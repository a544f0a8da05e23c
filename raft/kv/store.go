package kv

import (
	"log/slog"
	"sync"

	"github.com/google/btree"
)

// btreeDegree: nodes of up to 2*16-1 items of 64 bytes keep inserts cheap
// (small memmoves) with little per-key overhead.
const btreeDegree = 16

// entry is one key as stored in the B-tree (by value: no per-key
// allocation besides the key and value bytes). A zero mod means "absent"
// where entries stand for lookups.
type entry struct {
	key                  string
	value                []byte
	create, mod, version int64
}

func lessEntry(a, b entry) bool { return a.key < b.key }

func (e *entry) exists() bool { return e.mod != 0 }

func (e *entry) keyValue() KeyValue {
	return KeyValue{Key: e.key, Value: e.value, CreateRevision: e.create, ModRevision: e.mod, Version: e.version}
}

// Store is the revisioned key/value state machine. Apply and Restore are
// meant to be called by one goroutine (the Raft apply loop); every other
// method may be called concurrently with them and with each other.
type Store struct {
	opts Options
	log  *slog.Logger

	mu       sync.RWMutex
	tree     *btree.BTreeG[entry]
	rev      int64
	dedup    *dedupTable
	hist     *history
	watchers []*Watcher // registration order; index kept in Watcher.slot
}

// New returns an empty store at revision 0.
func New(opts Options) *Store {
	opts = opts.withDefaults()
	return &Store{
		opts:  opts,
		log:   opts.Logger,
		tree:  btree.NewG(btreeDegree, lessEntry),
		dedup: newDedupTable(opts.DedupLimit),
		hist:  newHistory(opts.HistoryLimit, opts.HistoryBytes, 0),
	}
}

// Apply decodes one Request and applies it atomically; see the package
// documentation for the rules. Undecodable data changes nothing and yields
// Result{Succeeded: false, FailedOp: -1} with the current revision.
func (s *Store) Apply(data []byte) Result {
	req, err := UnmarshalRequest(data)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.log.Warn("kv: apply: ignoring undecodable entry", "bytes", len(data), "revision", s.rev, "err", err)
		return Result{Revision: s.rev, FailedOp: -1}
	}
	if req.ID != 0 {
		if e, ok := s.dedup.lookup(req.ID); ok {
			return e.result()
		}
	}
	res := s.applyLocked(req)
	if req.ID != 0 {
		s.dedup.add(entryFor(req.ID, &res))
	}
	return res
}

// applyLocked runs a transaction in two passes: the first evaluates every op
// in order against the committed state overlaid with the earlier ops'
// effects and checks preconditions; only if all hold does the second pass
// write to the tree. So a failed transaction leaves no trace.
func (s *Store) applyLocked(req *Request) Result {
	ops := req.Ops
	newRev := s.rev + 1
	var small [4]entry
	after := small[:0] // state of each op's key after the op
	if len(ops) > len(small) {
		after = make([]entry, 0, len(ops))
	}
	var last map[string]int // key → index of its latest op, for large txns
	if len(ops) > 8 {
		last = make(map[string]int, len(ops))
	}
	var prev []*KeyValue
	if len(ops) > 0 {
		prev = make([]*KeyValue, len(ops))
	}
	nEvents := 0
	for i := range ops {
		op := &ops[i]
		cur := s.lookup(op.Key, i, after, ops, last)
		if !precondition(op.IfModRev, &cur) {
			res := Result{Revision: s.rev, FailedOp: i}
			if c, ok := s.tree.Get(entry{key: op.Key}); ok {
				kv := c.keyValue()
				res.Current = &kv
			}
			return res
		}
		if cur.exists() {
			kv := cur.keyValue()
			prev[i] = &kv
		}
		var next entry
		switch op.Type {
		case OpPut:
			next = entry{key: op.Key, value: op.Value, create: newRev, mod: newRev, version: 1}
			if cur.exists() {
				next.key = cur.key // share the stored key string
				next.create = cur.create
				next.version = cur.version + 1
			}
			nEvents++
		case OpDelete:
			if cur.exists() {
				nEvents++
			}
		}
		after = append(after, next)
		if last != nil {
			last[op.Key] = i
		}
	}

	var evs []Event
	if nEvents > 0 {
		evs = make([]Event, 0, nEvents)
	}
	for i := range ops {
		switch ops[i].Type {
		case OpPut:
			s.tree.ReplaceOrInsert(after[i])
			evs = append(evs, Event{Type: EventPut, KV: after[i].keyValue(), Prev: prev[i]})
		case OpDelete:
			if prev[i] != nil {
				s.tree.Delete(entry{key: ops[i].Key})
				evs = append(evs, Event{Type: EventDelete, KV: KeyValue{Key: prev[i].Key, ModRevision: newRev}, Prev: prev[i]})
			}
		}
	}
	s.rev = newRev
	if len(evs) > 0 {
		s.hist.add(newRev, evs)
		s.notifyLocked(newRev, evs)
	}
	return Result{Revision: newRev, Succeeded: true, FailedOp: -1, Prev: prev}
}

// lookup returns the state of key as seen by op i: the result of the latest
// earlier op on the same key in this transaction, else the committed entry.
func (s *Store) lookup(key string, i int, after []entry, ops []Op, last map[string]int) entry {
	if last != nil {
		if j, ok := last[key]; ok {
			return after[j]
		}
	} else {
		for j := i - 1; j >= 0; j-- {
			if ops[j].Key == key {
				return after[j]
			}
		}
	}
	e, _ := s.tree.Get(entry{key: key})
	return e
}

func precondition(ifModRev int64, cur *entry) bool {
	switch {
	case ifModRev < 0:
		return true
	case ifModRev == 0:
		return !cur.exists()
	default:
		return cur.exists() && cur.mod == ifModRev
	}
}

// Get returns the current value of key, whether it exists, and the store
// revision the answer reflects.
func (s *Store) Get(key string) (kv KeyValue, ok bool, rev int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.tree.Get(entry{key: key})
	if ok {
		kv = e.keyValue()
	}
	return kv, ok, s.rev
}

// List returns, sorted by key, the keys that start with prefix and are >=
// startKey, at most limit of them (limit <= 0: all). more reports that
// further matching keys follow; page on with startKey = last key + "\x00".
func (s *Store) List(prefix, startKey string, limit int) (kvs []KeyValue, more bool, rev int64) {
	from := prefix
	if startKey > from {
		from = startKey
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.tree.AscendGreaterOrEqual(entry{key: from}, func(e entry) bool {
		if !hasPrefix(e.key, prefix) {
			return false
		}
		if limit > 0 && len(kvs) == limit {
			more = true
			return false
		}
		kvs = append(kvs, e.keyValue())
		return true
	})
	return kvs, more, s.rev
}

// Count returns the number of keys that start with prefix.
func (s *Store) Count(prefix string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if prefix == "" {
		return s.tree.Len()
	}
	n := 0
	s.tree.AscendGreaterOrEqual(entry{key: prefix}, func(e entry) bool {
		if !hasPrefix(e.key, prefix) {
			return false
		}
		n++
		return true
	})
	return n
}

// Revision returns the current store revision (0 for an empty new store).
func (s *Store) Revision() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rev
}

// CompactRevision returns the oldest revision a watch may start after:
// the history holds every event with a newer revision.
func (s *Store) CompactRevision() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.hist.compactRev
}
